package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgCPU reads the CPU time of a PostgreSQL server on this machine: its postmaster's and
// every process's under it (backends, WAL writer, checkpointer), the exited ones'
// included (a parent's reaped children count in its own /proc stat), so the benchmarks
// on --store report the database's share of a step beside the server's.
type pgCPU struct{ postmaster int }

// clockTicks is the kernel's USER_HZ: /proc's CPU times are in these.
const clockTicks = 100

// findPGCPU finds the postmaster of the server at url, a backend's parent. ok is false
// when that process is not on this machine (the server is remote, or in a container).
func findPGCPU(ctx context.Context, url string) (p *pgCPU, ok bool, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, false, fmt.Errorf("postgres CPU: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return nil, false, fmt.Errorf("postgres CPU: %w", err)
	}
	f, err := procStat(pid)
	if err != nil {
		return nil, false, nil // not our machine's process table
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return nil, false, fmt.Errorf("postgres CPU: /proc/%d/stat: %w", pid, err)
	}
	return &pgCPU{postmaster: ppid}, true, nil
}

// Us is the server's CPU time so far, in microseconds.
func (p *pgCPU) Us() (int64, error) {
	f, err := procStat(p.postmaster)
	if err != nil {
		return 0, fmt.Errorf("postgres CPU: %w", err)
	}
	ticks, err := sumFields(f, 11, 12, 13, 14) // utime, stime, cutime, cstime
	if err != nil {
		return 0, err
	}
	children, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.postmaster), "task", strconv.Itoa(p.postmaster), "children"))
	if err != nil {
		return 0, fmt.Errorf("postgres CPU: %w", err)
	}
	for _, c := range strings.Fields(string(children)) {
		pid, err := strconv.Atoi(c)
		if err != nil {
			continue
		}
		cf, err := procStat(pid)
		if err != nil {
			continue // exited meanwhile: counted in the postmaster's cutime once reaped
		}
		n, err := sumFields(cf, 11, 12)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return ticks * 1_000_000 / clockTicks, nil
}

// procStat returns the fields of /proc/pid/stat after the command name: [0] is the
// state, [1] the parent, [11] utime (the stat's 14th field).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the name may hold spaces and parentheses
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

func sumFields(f []string, idx ...int) (int64, error) {
	var n int64
	for _, i := range idx {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat field %d: %w", i, err)
		}
		n += v
	}
	return n, nil
}

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/duraton/duraton/server/servertest"
)

// Benchmarks on PostgreSQL: `--store postgres://...` runs the bench server child on
// that database (one replica, leading); `--replicas N` runs N real `duraton serve`
// replicas on it instead, and the load goes through all of them (followers forward to
// the leader). Their CPU is read from /proc (they are not bench children that answer
// "stats"); PostgreSQL's own CPU is not counted.

// benchStore is where a benchmark's server keeps its data.
type benchStore struct {
	url      string // postgres:// URL; "": a fresh bbolt file
	replicas int    // `duraton serve` replicas on url instead of a bench server (0: none)
}

// checkBenchStore validates --store and --replicas.
func checkBenchStore(store string, external bool, replicas int) error {
	switch {
	case store == "" && replicas != 0:
		return errors.New("--replicas needs --store postgres://...")
	case store == "":
		return nil
	case !strings.HasPrefix(store, "postgres://") && !strings.HasPrefix(store, "postgresql://"):
		return errors.New("--store must be a postgres:// URL")
	case !external:
		return errors.New("--store needs the server out of process (--server=external for publish, --endpoint=external or ts for workflow)")
	case replicas < 0 || replicas > 16:
		return errors.New("--replicas must be between 0 and 16")
	}
	return nil
}

// benchReplicas is a set of `duraton serve` processes on one database.
type benchReplicas struct {
	procs []*exec.Cmd
	URLs  []string
	dir   string
}

// startBenchReplicas starts n replicas on store and waits until each listens and one
// leads. The first URL is a follower's when n > 1.
func startBenchReplicas(ctx context.Context, store string, n, maxInFlight int) (*benchReplicas, error) {
	bin, err := benchChildBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "duraton-bench-replicas-")
	if err != nil {
		return nil, err
	}
	rs := &benchReplicas{dir: dir}
	leading := make(chan int, n)
	for i := 0; i < n; i++ {
		cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--store", store, "--data", dir,
			"--token", servertest.Token, "--current-signing-key", servertest.CurrentKey, "--next-signing-key", servertest.NextKey,
			"--allow-cidrs", "127.0.0.0/8", "--max-in-flight", strconv.Itoa(maxInFlight), "--log-level", "warn")
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			rs.close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			rs.close()
			return nil, err
		}
		rs.procs = append(rs.procs, cmd)
		sc := bufio.NewScanner(out)
		if !sc.Scan() {
			rs.close()
			return nil, fmt.Errorf("replica %d exited before it listened", i)
		}
		// "listening on http://127.0.0.1:PORT (replica r-...)"
		url, _, _ := strings.Cut(strings.TrimPrefix(sc.Text(), "listening on "), " ")
		rs.URLs = append(rs.URLs, url)
		go func(i int) {
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "leading") {
					leading <- i
				}
			}
		}(i)
		if i == 0 {
			// The first one leads (the database is empty): wait, so the others follow.
			select {
			case <-leading:
			case <-time.After(30 * time.Second):
				rs.close()
				return nil, errors.New("no replica took the leader lease within 30 s")
			case <-ctx.Done():
				rs.close()
				return nil, ctx.Err()
			}
		}
	}
	if n > 1 {
		rs.URLs = append(rs.URLs[1:], rs.URLs[0]) // a follower first
	}
	return rs, nil
}

// Stats sums the replicas' CPU time (user + system, from /proc/PID/stat).
func (rs *benchReplicas) Stats() (childStats, error) {
	var total int64
	for _, p := range rs.procs {
		us, err := procCPUUs(p.Process.Pid)
		if err != nil {
			return childStats{}, err
		}
		total += us
	}
	return childStats{CPUUs: total}, nil
}

// procCPUUs reads a process's CPU time in µs (Linux; clock ticks of 10 ms).
func procCPUUs(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("replica CPU: %w", err)
	}
	// Fields after the command name (which may hold spaces) start after the last ')'.
	rest := string(raw[strings.LastIndexByte(string(raw), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, errors.New("replica CPU: short /proc stat line")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("replica CPU: malformed /proc stat line")
	}
	return (utime + stime) * 10_000, nil
}

// close stops the replicas (SIGTERM, then SIGKILL after 30 s).
func (rs *benchReplicas) close() {
	for _, p := range rs.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range rs.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(rs.dir)
}

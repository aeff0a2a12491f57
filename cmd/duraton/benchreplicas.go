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
	"github.com/duraton/duraton/storage/pg"
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
	shards   int    // the replicas' --shards
	projects int    // projects the load is spread over (0: project default only)
}

// checkBenchStore validates --store, --replicas, --shards and --projects.
func checkBenchStore(store string, external bool, replicas, shards, projects int) error {
	switch {
	case replicas == 0 && projects != 0:
		return errors.New("--projects needs --replicas")
	case projects < 0 || projects > 1000:
		return errors.New("--projects must be between 0 and 1000")
	case shards < 1 || shards > pg.MaxShards:
		return fmt.Errorf("--shards must be between 1 and %d", pg.MaxShards)
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
	procs  []*exec.Cmd
	URLs   []string // the first is not shard 0's leader, when n > 1
	byProc []string // procs[i]'s URL
	dir    string
}

// startBenchReplicas starts n replicas on store, divided into shards if it is new, and
// waits until each listens and the shards are shared out evenly.
func startBenchReplicas(ctx context.Context, store string, n, maxInFlight, shards int) (*benchReplicas, error) {
	bin, err := benchChildBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "duraton-bench-replicas-")
	if err != nil {
		return nil, err
	}
	rs := &benchReplicas{dir: dir}
	for i := 0; i < n; i++ {
		cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--store", store, "--data", dir,
			"--token", servertest.Token, "--current-signing-key", servertest.CurrentKey, "--next-signing-key", servertest.NextKey,
			"--allow-cidrs", "127.0.0.0/8", "--max-in-flight", strconv.Itoa(maxInFlight), "--log-level", "warn",
			"--shards", strconv.Itoa(shards))
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
		// "listening on http://127.0.0.1:PORT (replica r-..., N shards)"
		url, _, _ := strings.Cut(strings.TrimPrefix(sc.Text(), "listening on "), " ")
		rs.byProc = append(rs.byProc, url)
		go func() {
			for sc.Scan() { // drain: the replica must never block on its stdout
			}
		}()
	}
	if err := waitShardsShared(ctx, store, n, 60*time.Second); err != nil {
		rs.close()
		return nil, err
	}
	rs.URLs = append(rs.byProc[1:], rs.byProc[0]) // with one shard, the first leads it
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

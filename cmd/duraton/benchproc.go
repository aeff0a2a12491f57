package main

// Child processes for the benchmarks that measure CPU per operation of one side alone:
// `bench _server` runs an in-process Duraton (the same as servertest) and `bench
// _wf-endpoint` a Go SDK workflow endpoint, each in its own process started from this
// binary. They print "ready <url>" once listening, answer the line "stats" on stdin with
// one JSON line (their own getrusage CPU time and counters), and exit when stdin closes.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/server/servertest"
	"github.com/duraton/duraton/storage"
)

// childStats is what a benchmark child answers to "stats".
type childStats struct {
	CPUUs     int64   `json:"cpu_us"` // user + system CPU of the whole process so far
	Ops       int64   `json:"ops,omitempty"`
	Commits   int64   `json:"commits,omitempty"`
	CommitUs  int64   `json:"commit_us,omitempty"`
	Pages     int64   `json:"pages,omitempty"`        // bbolt page writes (by checkpoints)
	LogBytes  int64   `json:"log_bytes,omitempty"`    // write-ahead log bytes by commits
	Ckpts     int64   `json:"checkpoints,omitempty"`  // checkpoints of the log into bbolt
	Overheads []int64 `json:"overheads_ns,omitempty"` // step end → next delivery, endpoint only
	Dups      int64   `json:"dups,omitempty"`
}

// selfCPU is this process's user + system CPU time.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// serveChildStdin answers "stats" lines with stats() until stdin closes.
func serveChildStdin(stdin io.Reader, stdout *syncWriter, stats func() childStats) error {
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		if sc.Text() != "stats" {
			return fmt.Errorf("unknown command %q", sc.Text())
		}
		st := stats()
		cpu, err := selfCPU()
		if err != nil {
			return err
		}
		st.CPUUs = cpu.Microseconds()
		line, err := json.Marshal(st)
		if err != nil {
			return err
		}
		stdout.line("stats " + string(line))
	}
	return sc.Err()
}

// syncWriter writes whole lines to a stream from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) line(l string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(s.w, l+"\n")
}

// runBenchServerChild is `duraton bench _server`.
func runBenchServerChild(args []string, stdin io.Reader, stdout io.Writer, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench _server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	inFlight := fs.Int("max-in-flight", 512, "engine MaxInFlight")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the server process to this file")
	memProfile := fs.String("memprofile", "", "write an allocation profile of the server process to this file at exit")
	store := fs.String("store", "", "postgres:// URL of the database to run on (empty: a fresh bbolt file)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	stop, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			if f, err := os.Create(*memProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	srv, err := servertest.Start(servertest.Options{Engine: delivery.Config{MaxInFlight: *inFlight}, StoreURL: *store})
	if err != nil {
		return err
	}
	defer srv.Close()
	out := &syncWriter{w: stdout}
	out.line("ready " + srv.URL)
	return serveChildStdin(stdin, out, func() childStats {
		return storeChildStats(srv.StoreStats())
	})
}

// runBenchWorkflowEndpointChild is `duraton bench _wf-endpoint`: the S-step noop
// workflow of `bench workflow`, served by the Go SDK with the QSTASH_* environment. It
// prints "done <run id>" when a run's last delivery returns.
func runBenchWorkflowEndpointChild(args []string, stdin io.Reader, stdout io.Writer, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench _wf-endpoint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	steps := fs.Int("steps", 3, "noop steps per run")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the endpoint process to this file")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if os.Getenv("GOGC") == "" {
		// An SDK user's process runs at Go's default, not at the server's target.
		debug.SetGCPercent(100)
	}
	stop, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	out := &syncWriter{w: stdout}
	var mu sync.Mutex
	lastStep := map[string]time.Time{}
	finished := map[string]bool{}
	var overheads []int64
	var dups int64
	route := func(c *sdk.Context) (any, error) {
		now := time.Now()
		mu.Lock()
		if last, ok := lastStep[c.RunID]; ok {
			overheads = append(overheads, int64(now.Sub(last)))
			delete(lastStep, c.RunID)
		}
		mu.Unlock()
		for i := 0; i < *steps; i++ {
			if _, err := sdk.Run(c, "s"+strconv.Itoa(i), func() (int, error) {
				mu.Lock()
				lastStep[c.RunID] = time.Now()
				mu.Unlock()
				return i, nil
			}); err != nil {
				return nil, err
			}
		}
		mu.Lock()
		dup := finished[c.RunID]
		finished[c.RunID] = true
		if dup {
			dups++
		}
		mu.Unlock()
		if !dup {
			out.line("done " + c.RunID)
		}
		return nil, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	endpoint := &http.Server{Handler: sdk.Serve(route)}
	go endpoint.Serve(ln)
	defer endpoint.Close()
	out.line("ready http://" + ln.Addr().String())
	return serveChildStdin(stdin, out, func() childStats {
		mu.Lock()
		defer mu.Unlock()
		return childStats{Overheads: slices.Clone(overheads), Dups: dups}
	})
}

// benchChild is a running benchmark child process.
type benchChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	URL   string
	stats chan childStats
	done  chan error
}

// benchChildBinary is the binary benchmark children run: this one (tests point it at a
// built duraton).
var benchChildBinary = os.Executable

// startBenchChild starts this binary with `bench <args>` and waits for its ready line.
// Lines other than "ready" and "stats" go to onLine.
func startBenchChild(ctx context.Context, env []string, onLine func(string), args ...string) (*benchChild, error) {
	bin, err := benchChildBinary()
	if err != nil {
		return nil, err
	}
	return startChildProcess(ctx, "bench "+args[0], exec.Command(bin, append([]string{"bench"}, args...)...), env, onLine)
}

// startChildProcess starts cmd (a program speaking the benchmark children's line
// protocol: "ready <url>", "stats <json>") with env added and waits for its ready line.
func startChildProcess(ctx context.Context, name string, cmd *exec.Cmd, env []string, onLine func(string)) (*benchChild, error) {
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &benchChild{cmd: cmd, stdin: stdin, stats: make(chan childStats, 1), done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20) // a stats line carries every step overhead
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "ready "):
				ready <- strings.TrimPrefix(line, "ready ")
			case strings.HasPrefix(line, "stats "):
				var st childStats
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "stats ")), &st); err == nil {
					c.stats <- st
				}
			case onLine != nil:
				onLine(line)
			}
		}
		if err := sc.Err(); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			c.done <- fmt.Errorf("reading its output: %w", err)
			return
		}
		c.done <- cmd.Wait()
	}()
	select {
	case c.URL = <-ready:
		return c, nil
	case err := <-c.done:
		return nil, fmt.Errorf("%s exited before it was ready: %v", name, err)
	case <-time.After(30 * time.Second):
		c.close()
		return nil, fmt.Errorf("%s was not ready within 30 s", name)
	case <-ctx.Done():
		c.close()
		return nil, ctx.Err()
	}
}

// Stats asks the child for its counters and CPU time.
func (c *benchChild) Stats() (childStats, error) {
	if _, err := io.WriteString(c.stdin, "stats\n"); err != nil {
		return childStats{}, err
	}
	select {
	case st := <-c.stats:
		return st, nil
	case err := <-c.done:
		c.done <- err
		return childStats{}, fmt.Errorf("benchmark child exited: %v", err)
	case <-time.After(10 * time.Second):
		return childStats{}, errors.New("benchmark child did not answer stats within 10 s")
	}
}

// close closes the child's stdin (it shuts down and exits) and waits for it, killing it
// after 30 s.
func (c *benchChild) close() {
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// devEnv is the QSTASH_* environment of a benchmark server child (the dev credentials).
func devEnv(url string) []string {
	return []string{"QSTASH_URL=" + url, "QSTASH_TOKEN=" + servertest.Token,
		"QSTASH_CURRENT_SIGNING_KEY=" + servertest.CurrentKey, "QSTASH_NEXT_SIGNING_KEY=" + servertest.NextKey}
}

// envFunc turns KEY=VALUE pairs into a getenv.
func envFunc(env []string) func(string) string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// storeChildStats is the store's side of a bench child's stats.
func storeChildStats(st storage.Stats) childStats {
	return childStats{Ops: st.Ops, Commits: st.Commits, CommitUs: st.CommitTime.Microseconds(), Pages: st.PagesWritten,
		LogBytes: st.LogBytes, Ckpts: st.Checkpoints}
}

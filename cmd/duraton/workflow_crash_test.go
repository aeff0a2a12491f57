package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	// workflowCrashRuns is how many runs testdata/compat/load/crash.mjs triggers.
	workflowCrashRuns = 200
	// workflowCrashKillAt: SIGKILL duraton once this many runs are RUN_SUCCESS.
	workflowCrashKillAt = 50
	// workflowCrashTimeout bounds the whole Node script (its own completion deadline is ~3 min).
	workflowCrashTimeout = 5 * time.Minute
)

// TestWorkflowCrashRecovery SIGKILLs duraton while workflow runs (sleeps and Promise.all
// groups, official serve() endpoints) are in flight, restarts it on the same data directory
// and port, and requires every run to reach RUN_SUCCESS with no step recorded twice.
//
// The port is fixed because the SDK inside the endpoints keeps using the QSTASH_URL it was
// given: it must stay valid across the restart.
func TestWorkflowCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary, runs Node")
	}
	dir, node := compatDir(t)
	addr := freeLoopbackAddr(t)
	dataDir := t.TempDir()
	p1 := startDuratonAddr(t, dataDir, addr)

	ctx, cancel := context.WithTimeout(context.Background(), workflowCrashTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("load", "crash.mjs"))
	cmd.Dir = dir
	cmd.Env = append(sdkEnv(os.Environ()), p1.Env()...)
	cmd.Env = append(cmd.Env, "WF_CRASH_RUNS="+strconv.Itoa(workflowCrashRuns))
	cmd.Stderr = &lineLogger{t: t}
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	// Read the script's output: log it, and report the PROGRESS counts.
	progress := make(chan int, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "PROGRESS done="); ok {
				if v, err := strconv.Atoi(n); err == nil {
					select {
					case <-progress: // keep only the latest count
					default:
					}
					progress <- v
				}
				continue // one per poll: too chatty for the log
			}
			t.Log(line)
		}
	}()
	var (
		waitOnce sync.Once
		waitErr  error
	)
	waitScript := func() error {
		waitOnce.Do(func() {
			<-readDone
			waitErr = cmd.Wait()
		})
		return waitErr
	}
	// On an early failure: end the script and its reader before the test returns.
	t.Cleanup(func() {
		cancel()
		_ = waitScript()
	})

	// Kill once enough runs are done, while the rest are still in flight.
	killAt := time.NewTimer(2 * time.Minute)
	defer killAt.Stop()
	done := 0
	for done < workflowCrashKillAt {
		select {
		case done = <-progress:
		case <-readDone:
			t.Fatalf("crash.mjs ended before %d runs were done (exit: %v); output above", workflowCrashKillAt, waitScript())
		case <-killAt.C:
			t.Fatalf("only %d of %d runs reached RUN_SUCCESS within 2 min; no crash done yet (output above)", done, workflowCrashRuns)
		}
	}
	p1.Kill()
	t.Logf("SIGKILLed duraton with %d/%d runs done", done, workflowCrashRuns)
	require.Less(t, done, workflowCrashRuns, "every run was already done at the crash: nothing was in flight")

	p2 := startDuratonAddr(t, dataDir, addr)
	require.Equal(t, p1.URL, p2.URL, "QSTASH_URL after the restart")
	require.Equal(t, p1.Token, p2.Token, "QSTASH_TOKEN after the restart")
	require.Equal(t, p1.CurrentSigningKey, p2.CurrentSigningKey, "signing key after the restart")
	require.Equal(t, p1.NextSigningKey, p2.NextSigningKey, "next signing key after the restart")
	t.Log("restarted duraton on the same data directory and port")

	err = waitScript()
	if ctx.Err() != nil {
		t.Fatalf("crash.mjs did not finish within %s", workflowCrashTimeout)
	}
	require.NoError(t, err, "crash.mjs failed (output above)")
}

// freeLoopbackAddr returns 127.0.0.1:<port> for a port that was free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

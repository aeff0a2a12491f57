package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// workflowLoadTimeout bounds the Node load script: triggering, the ~3 min completion deadline
// it enforces itself, and the per-run log checks.
const workflowLoadTimeout = 5 * time.Minute

// TestWorkflowLoad500Runs triggers 500 runs of a 3-step serve() workflow concurrently with
// the official @upstash/workflow Client (testdata/compat/load/load.mjs), waits until all are
// RUN_SUCCESS and checks, per run through the logs API, that stepIds 1..3 are each recorded
// exactly once. The script prints the throughput.
func TestWorkflowLoad500Runs(t *testing.T) {
	if testing.Short() {
		t.Skip("load: starts the duraton binary and Node, runs 500 workflow runs")
	}
	dir, node := compatDir(t)
	p := startDuraton(t, t.TempDir())
	err := runNodeScript(t, node, dir, filepath.Join("load", "load.mjs"), workflowLoadTimeout, p.Env())
	require.NoError(t, err, "load/load.mjs failed (output above)")
}

// runNodeScript runs `node script` in dir with the SDK environment plus extra, logging every
// output line, and returns its exit error (a timeout fails the test).
func runNodeScript(t *testing.T, node, dir, script string, timeout time.Duration, extra []string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(sdkEnv(os.Environ()), extra...)
	out := &lineLogger{t: t}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	out.Flush()
	if ctx.Err() != nil {
		t.Fatalf("node %s did not finish within %s", script, timeout)
	}
	return err
}

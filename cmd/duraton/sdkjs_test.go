package main

// The TypeScript SDK (sdk/js) against real duraton processes: its node:test files run
// every flow-control documentation example as written, send events from TypeScript, and
// invoke Go workflows (served here, by the Go SDK) and are invoked by them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

// sdkjsTimeout bounds the TypeScript build and the whole node --test run.
const sdkjsTimeout = 4 * time.Minute

// sdkjsOutput is where the runner's output is kept (sdk/js, git-ignored): .ci/run ends
// its own output with the runner's summary from it.
const sdkjsOutput = ".test-output.txt"

func TestSDKJS(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the duraton binary and Node")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "sdk", "js"))
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not on PATH (Node >= 20 is needed for the TypeScript SDK's tests)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "typescript", "package.json")); err != nil {
		installSDKJS(t, dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sdkjsTimeout)
	defer cancel()
	// Build dist/ (the tests import the built package), type-check the type tests
	// (test/types: every @ts-expect-error must be an error) and compile the examples
	// (.build/examples, run by test/examples.test.mjs).
	tsc := filepath.Join(dir, "node_modules", "typescript", "bin", "tsc")
	for _, project := range []string{"tsconfig.json", "tsconfig.test.json", "tsconfig.examples.json"} {
		cmd := exec.CommandContext(ctx, node, tsc, "-p", project)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "tsc -p %s:\n%s", project, out)
	}

	main := startDuraton(t, t.TempDir())
	ceiling := startDuratonAddr(t, t.TempDir(), "127.0.0.1:0", "--project-ceiling", "1")
	// The rateLimit example starts ~1,000 runs at once: on the main process they would fill
	// its project's ceiling and hold the other files' runs behind them (under a loaded CI
	// machine, past their deadlines). It gets a process of its own.
	flood := startDuraton(t, t.TempDir())
	goBase := serveGoWorkflows(t, main)

	files, err := filepath.Glob(filepath.Join(dir, "test", "*.test.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	args := []string{"--test", "--test-concurrency=8", "--test-reporter=spec"}
	for _, f := range files {
		args = append(args, filepath.Join("test", filepath.Base(f)))
	}
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(sdkEnv(os.Environ()), main.Env()...)
	cmd.Env = append(cmd.Env,
		"DURATON_CEILING_URL="+ceiling.URL,
		"DURATON_CEILING_TOKEN="+ceiling.Token,
		"DURATON_CEILING_CURRENT_SIGNING_KEY="+ceiling.CurrentSigningKey,
		"DURATON_CEILING_NEXT_SIGNING_KEY="+ceiling.NextSigningKey,
		"DURATON_FLOOD_URL="+flood.URL,
		"DURATON_FLOOD_TOKEN="+flood.Token,
		"DURATON_FLOOD_CURRENT_SIGNING_KEY="+flood.CurrentSigningKey,
		"DURATON_FLOOD_NEXT_SIGNING_KEY="+flood.NextSigningKey,
		"GO_WORKFLOWS="+goBase,
	)
	report, err := os.Create(filepath.Join(dir, sdkjsOutput))
	require.NoError(t, err)
	defer report.Close()
	out := &lineLogger{t: t}
	cmd.Stdout, cmd.Stderr = teeWriter{out, report}, teeWriter{out, report}
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	out.Flush()
	if ctx.Err() != nil {
		fmt.Fprintf(report, "\nnode --test did not finish within %s\n", sdkjsTimeout)
		t.Fatalf("node --test did not finish within %s", sdkjsTimeout)
	}
	require.NoError(t, err, "node --test in sdk/js failed (output above)")
}

// installSDKJS installs sdk/js's pinned dependencies from its lock file (`npm ci`), so
// that `go test ./...` on a fresh machine runs these tests instead of skipping them.
func installSDKJS(t *testing.T, dir string) {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		skipOrFail(t, "sdk/js/node_modules is missing and npm is not on PATH: install Node.js >= 20 (or run npm ci --prefix sdk/js)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("npm ci output:\n%s", out)
		skipOrFail(t, "npm ci in sdk/js failed: "+err.Error())
	}
}

// teeWriter writes to both; a failed write to the report file is not the test's failure
// but is not silent either (the log still has every line).
type teeWriter struct {
	log    *lineLogger
	report *os.File
}

func (w teeWriter) Write(p []byte) (int, error) {
	if _, err := w.report.Write(p); err != nil {
		w.log.t.Logf("writing %s: %v", sdkjsOutput, err)
	}
	return w.log.Write(p)
}

// serveGoWorkflows serves two Go SDK workflows on loopback (every delivery verified
// with the process's signing keys) and returns their base URL:
//
//   - /go/double: doubles the "n" of its payload (a TypeScript workflow invokes it);
//   - /go/parent: a native run whose event data is {"target": URL, "n": N}; it invokes
//     the workflow at target (a TypeScript one) with {"n": N} and returns its result.
func serveGoWorkflows(t *testing.T, p *proc) string {
	t.Helper()
	opts := func() []sdk.ServeOption {
		return []sdk.ServeOption{
			sdk.WithServeCredentials(p.URL, p.Token),
			sdk.WithReceiver(&sdk.Receiver{CurrentSigningKey: p.CurrentSigningKey, NextSigningKey: p.NextSigningKey}),
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/go/double", sdk.Serve(func(c *sdk.Context) (any, error) {
		var in struct{ N int }
		if err := c.DecodePayload(&in); err != nil {
			return nil, sdk.NonRetryable(err)
		}
		d, err := sdk.Run(c, "double", func() (int, error) { return in.N * 2, nil })
		return map[string]any{"doubled": d, "lang": "go"}, err
	}, opts()...))
	mux.Handle("/go/parent", sdk.Serve(func(c *sdk.Context) (any, error) {
		ev, ok := c.Event()
		if !ok {
			return nil, sdk.NonRetryable(errors.New("not started by an event"))
		}
		var in struct {
			Target string
			N      int
		}
		if err := ev.Decode(&in); err != nil {
			return nil, sdk.NonRetryable(err)
		}
		body, err := json.Marshal(map[string]int{"n": in.N})
		if err != nil {
			return nil, err
		}
		res, err := c.Invoke("call-ts", sdk.InvokeRequest{URL: in.Target, Body: body})
		if err != nil {
			return nil, err
		}
		var child any
		if err := json.Unmarshal(res.Body, &child); err != nil {
			return nil, sdk.NonRetryable(fmt.Errorf("child body %q: %w", res.Body, err))
		}
		return sdk.Run(c, "child-result", func() (map[string]any, error) {
			return map[string]any{"child": child, "failed": res.IsFailed, "event": ev.Name}, nil
		})
	}, opts()...))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("go workflows: %v", err)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + strings.TrimPrefix(ln.Addr().String(), "http://")
}

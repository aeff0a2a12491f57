package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// compatTimeout bounds one whole Node run (all the test files of one suite).
const compatTimeout = 5 * time.Minute

// TestCompatQStashSDK runs the official @upstash/qstash SDK (testdata/compat, pinned in its
// package-lock.json) against a real duraton process: it proves that an unmodified QStash
// client and Receiver work with duraton for publish, batch, messages, DLQ, logs, queues,
// signing, auth and input validation. The workflow files (wf-*.test.mjs, native.test.mjs)
// run in TestCompatWorkflowSDK.
func TestCompatQStashSDK(t *testing.T) {
	runCompatSuite(t, func(name string) bool { return !workflowSDKFile(name) }, 1, devTarget)
}

// TestCompatWorkflowSDK runs the official @upstash/workflow SDK (wf-*.test.mjs): real serve()
// endpoints on 127.0.0.1 that verify every delivery with the SDK's own Receiver, triggered
// with the official workflow Client. The files are independent (own endpoints, own run ids,
// filters by run id), so they run concurrently against one duraton process. native.test.mjs
// runs serve() endpoints as native workflows (PUT /apps, POST /events).
func TestCompatWorkflowSDK(t *testing.T) {
	runCompatSuite(t, workflowSDKFile, 4, devTarget)
}

// devTarget starts `duraton dev` for a compat suite and returns its QSTASH_* variables.
func devTarget(t *testing.T) []string { return startDuraton(t, t.TempDir()).Env() }

// workflowSDKFile reports whether a compat test file uses @upstash/workflow.
func workflowSDKFile(name string) bool {
	return strings.HasPrefix(name, "wf-") || strings.HasPrefix(name, "native")
}

// runCompatSuite runs `node --test` on the testdata/compat/*.test.mjs files that keep accepts,
// with the QSTASH_* variables target returns (it starts the server under test).
func runCompatSuite(t *testing.T, keep func(name string) bool, concurrency int, target func(t *testing.T) []string) {
	if testing.Short() {
		t.Skip("e2e: starts the duraton binary and Node")
	}
	dir, node := compatDir(t)
	all, err := filepath.Glob(filepath.Join(dir, "*.test.mjs"))
	require.NoError(t, err)
	var files []string
	for _, f := range all {
		if name := filepath.Base(f); keep(name) {
			files = append(files, name)
		}
	}
	require.NotEmpty(t, files, "no matching *.test.mjs in %s", dir)

	env := target(t)

	ctx, cancel := context.WithTimeout(context.Background(), compatTimeout)
	defer cancel()
	args := append([]string{"--test", fmt.Sprintf("--test-concurrency=%d", concurrency), "--test-reporter=spec"}, files...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(sdkEnv(os.Environ()), env...)
	out := &lineLogger{t: t}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	out.Flush()
	if ctx.Err() != nil {
		t.Fatalf("node --test did not finish within %s", compatTimeout)
	}
	require.NoError(t, err, "node --test %s failed (output above)", strings.Join(files, " "))
}

// compatDir returns the absolute testdata/compat directory and the node binary, installing
// the pinned SDKs from the lock file when they are missing (skip or, under CI, fail when
// Node or npm is unavailable).
func compatDir(t *testing.T) (dir, node string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "compat"))
	require.NoError(t, err)
	node, err = exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not on PATH (Node >= 20 is needed)")
	}
	for _, pkg := range []string{"qstash", "workflow"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@upstash", pkg, "package.json")); err != nil {
			installSDK(t, dir)
			break
		}
	}
	return dir, node
}

// installSDK installs the pinned SDK from the committed lock file (`npm ci`), so that
// `go test ./...` on a fresh machine runs the suite instead of skipping it.
func installSDK(t *testing.T, dir string) {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		skipOrFail(t, "testdata/compat/node_modules is missing and npm is not on PATH: install Node.js >= 20")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("npm ci output:\n%s", out)
		skipOrFail(t, "npm ci in testdata/compat failed: "+err.Error())
	}
}

// skipOrFail skips with an instruction locally, but fails under CI: CI must never silently
// skip the compatibility suite.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set, so this is a failure, not a skip)", why)
	}
	t.Skip(why)
}

// sdkEnv drops every QSTASH_* variable (QSTASH_DEV / QSTASH_REGION would make the SDK ignore
// QSTASH_URL, and stale or per-region credentials must not leak in) and NODE_OPTIONS, so the
// caller can add the real ones.
func sdkEnv(environ []string) []string {
	out := environ[:0:0]
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "QSTASH_") || strings.Contains(name, "_QSTASH_") || name == "NODE_OPTIONS" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "NO_COLOR=1")
}

// lineLogger writes each complete output line to t.Log as it arrives.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil { // incomplete line: keep it for later
			l.buf.Reset()
			l.buf.WriteString(line)
			return len(p), nil
		}
		l.t.Log(strings.TrimRight(line, "\r\n"))
	}
}

// Flush logs a trailing line without a newline.
func (l *lineLogger) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > 0 {
		l.t.Log(l.buf.String())
		l.buf.Reset()
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// wfEndpoint is the endpoint child of `bench workflow --endpoint=external|ts`.
type wfEndpoint struct {
	kind  string // "go": `bench _wf-endpoint`; "ts": bench/wf-endpoint.mjs under node
	tsDir string // ts only: the npm project holding the pinned @upstash/workflow
}

// name is the result line's "endpoint" value.
func (e wfEndpoint) name() string {
	if e.kind == "ts" {
		return "ts"
	}
	return "external"
}

// errNoNode is returned when --endpoint=ts cannot run: node or the pinned SDK is missing.
var errNoNode = errors.New("--endpoint=ts needs node")

// startTSEndpoint starts `node <tsDir>/bench/wf-endpoint.mjs <steps>`: the official
// serve() of the @upstash/workflow installed (from the committed lock file) in tsDir.
func startTSEndpoint(ctx context.Context, tsDir string, steps int, env []string, onLine func(string)) (*benchChild, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("%w (Node >= 20) on PATH: %v", errNoNode, err)
	}
	dir, err := filepath.Abs(tsDir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@upstash", "workflow", "package.json")); err != nil {
		return nil, fmt.Errorf("%w and @upstash/workflow in %s/node_modules: run `npm ci --prefix %s` (the pinned versions of its package-lock.json)", errNoNode, dir, dir)
	}
	cmd := exec.Command(node, filepath.Join(dir, "bench", "wf-endpoint.mjs"), strconv.Itoa(steps))
	cmd.Dir = dir
	// env's QSTASH_* win over inherited ones (exec keeps the last of duplicates); the
	// script deletes QSTASH_DEV / QSTASH_REGION, which would point the SDK elsewhere.
	return startChildProcess(ctx, "node bench/wf-endpoint.mjs", cmd, env, onLine)
}

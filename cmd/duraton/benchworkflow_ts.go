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

// wfEndpoint is the endpoint child of `bench workflow --endpoint=external|ts|ts-native`.
type wfEndpoint struct {
	// kind is "go" (`bench _wf-endpoint`), "ts" (the official @upstash/workflow serve()
	// under node) or "ts-native" (@duraton/sdk's serve() under node).
	kind  string
	tsDir string // ts and ts-native: the npm project holding bench/wf-endpoint.mjs
}

// name is the result line's "endpoint" value.
func (e wfEndpoint) name() string {
	if e.kind == "go" {
		return "external"
	}
	return e.kind
}

// errNoNode is returned when --endpoint=ts or ts-native cannot run: node or the package is missing.
var errNoNode = errors.New("--endpoint=ts and ts-native need node")

// startTSEndpoint starts `node <tsDir>/bench/wf-endpoint.mjs <steps>`. For "ts" that is
// the official serve() of the @upstash/workflow installed (from the committed lock file)
// in tsDir; for "ts-native", @duraton/sdk built in tsDir (sdk/js: npm ci && npm run build).
func startTSEndpoint(ctx context.Context, ep wfEndpoint, steps int, env []string, onLine func(string)) (*benchChild, error) {
	node, dir, err := nodeAndPackage(ep)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(node, filepath.Join(dir, "bench", "wf-endpoint.mjs"), strconv.Itoa(steps))
	cmd.Dir = dir
	// env's QSTASH_* win over inherited ones (exec keeps the last of duplicates); the
	// script deletes QSTASH_DEV / QSTASH_REGION, which would point the SDK elsewhere.
	return startChildProcess(ctx, "node bench/wf-endpoint.mjs", cmd, env, onLine)
}

// nodeAndPackage finds node and ep's npm project (absolute), checking that it is installed
// (and, for ts-native, built).
func nodeAndPackage(ep wfEndpoint) (node, dir string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("%w (Node >= 20) on PATH: %v", errNoNode, err)
	}
	dir, err = filepath.Abs(ep.tsDir)
	if err != nil {
		return "", "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@upstash", "workflow", "package.json")); err != nil {
		return "", "", fmt.Errorf("%w and @upstash/workflow in %s/node_modules: run `npm ci --prefix %s` (the pinned versions of its package-lock.json)", errNoNode, dir, dir)
	}
	if ep.kind == "ts-native" {
		if _, err := os.Stat(filepath.Join(dir, "dist", "index.js")); err != nil {
			return "", "", fmt.Errorf("%w and @duraton/sdk built in %s/dist: run `npm run build --prefix %s`", errNoNode, dir, dir)
		}
	}
	return node, dir, nil
}

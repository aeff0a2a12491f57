package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// useBuiltBinaryForBenchChildren points the benchmark children at a built duraton (the
// test binary has no `bench` command).
func useBuiltBinaryForBenchChildren(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs duraton processes")
	}
	bin, err := duratonBinary()
	require.NoError(t, err)
	prev := benchChildBinary
	benchChildBinary = func() (string, error) { return bin, nil }
	t.Cleanup(func() { benchChildBinary = prev })
}

// TestBenchWorkflowExternalSmall runs `bench workflow --endpoint=external` at a small
// size: the server and the endpoint are child processes, every run finishes once, and
// both processes' CPU per step is measured.
func TestBenchWorkflowExternalSmall(t *testing.T) {
	useBuiltBinaryForBenchChildren(t)
	res, err := benchWorkflowExternal(context.Background(), 40, 3, 4, wfEndpoint{kind: "go"}, benchStore{}, "", "", "", func(int, int) {})
	require.NoError(t, err)
	require.Equal(t, "external", res.Endpoint)
	require.Zero(t, res.DuplicateRounds)
	require.Positive(t, res.StepsPerSec)
	require.Positive(t, res.ServerCPUUsPerStep)
	require.Positive(t, res.EndpointCPUUsPerStep)
	require.Positive(t, res.OverheadP50Ms)
	require.Positive(t, res.OpsPerCommit)
	require.InDelta(t, 3*res.ServerCPUUsPerStep, res.ServerCPUUsPerRun, 1)
}

// TestBenchWorkflowTSSmall runs `bench workflow --endpoint=ts` at a small size: the
// endpoint is the official @upstash/workflow serve() in a node child (the pinned SDK of
// testdata/compat, installed from its lock file when missing); every run finishes once and
// both processes' CPU per run is measured. Without node it skips, under CI=true it fails.
func TestBenchWorkflowTSSmall(t *testing.T) {
	useBuiltBinaryForBenchChildren(t)
	dir, _ := compatDir(t)
	res, err := benchWorkflowExternal(context.Background(), 30, 3, 4, wfEndpoint{kind: "ts", tsDir: dir}, benchStore{}, "", "", "", func(int, int) {})
	require.NoError(t, err)
	require.Equal(t, "ts", res.Endpoint)
	require.Equal(t, 30, res.Runs)
	require.Zero(t, res.DuplicateRounds)
	require.Positive(t, res.StepsPerSec)
	require.Positive(t, res.ServerCPUUsPerRun)
	require.Positive(t, res.EndpointCPUUsPerRun)
	require.InDelta(t, 3*res.EndpointCPUUsPerStep, res.EndpointCPUUsPerRun, 1)
	require.Positive(t, res.OverheadP50Ms, "the node endpoint reports step end → next delivery")
}

// TestBenchWorkflowTSNativeSmall runs `bench workflow --endpoint=ts-native` at a small
// size: the endpoint is @duraton/sdk's serve() (sdk/js, installed from its lock file and
// built when missing), answering inline; every run finishes once and both processes'
// CPU per run is measured. Without node it skips, under CI=true it fails.
func TestBenchWorkflowTSNativeSmall(t *testing.T) {
	useBuiltBinaryForBenchChildren(t)
	dir := builtSDKJS(t)
	res, err := benchWorkflowExternal(context.Background(), 30, 3, 4, wfEndpoint{kind: "ts-native", tsDir: dir}, benchStore{}, "", "", "", func(int, int) {})
	require.NoError(t, err)
	require.Equal(t, "ts-native", res.Endpoint)
	require.Equal(t, 30, res.Runs)
	require.Zero(t, res.DuplicateRounds)
	require.Positive(t, res.ServerCPUUsPerRun)
	require.Positive(t, res.EndpointCPUUsPerRun)
	require.Positive(t, res.OverheadP50Ms, "the node endpoint reports step end → next delivery")
}

// builtSDKJS returns sdk/js with its dependencies installed and dist/ built.
func builtSDKJS(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "sdk", "js"))
	require.NoError(t, err)
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not on PATH (Node >= 20 is needed for the TypeScript SDK)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "typescript", "package.json")); err != nil {
		installSDKJS(t, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "dist", "index.js")); err != nil {
		cmd := exec.Command(node, filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "tsc:\n%s", out)
	}
	return dir
}

// TestBenchPublishExternalSmall runs `bench publish --server=external` at a small size.
func TestBenchPublishExternalSmall(t *testing.T) {
	useBuiltBinaryForBenchChildren(t)
	res, err := benchPublish(context.Background(), 200, 8, publishServer{external: true}, func(int, int) {})
	require.NoError(t, err)
	require.Equal(t, "external", res.Server)
	require.Zero(t, res.Duplicates)
	require.Positive(t, res.ServerCPUUsPerMessage)
	require.Positive(t, res.DeliveredPerSec)
}

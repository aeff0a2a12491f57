package main

import (
	"context"
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

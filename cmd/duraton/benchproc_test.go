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
	res, err := benchWorkflowExternal(context.Background(), 40, 3, 4, "", "", "", func(int, int) {})
	require.NoError(t, err)
	require.Equal(t, "external", res.Endpoint)
	require.Zero(t, res.DuplicateRounds)
	require.Positive(t, res.StepsPerSec)
	require.Positive(t, res.ServerCPUUsPerStep)
	require.Positive(t, res.EndpointCPUUsPerStep)
	require.Positive(t, res.OverheadP50Ms)
	require.Positive(t, res.OpsPerCommit)
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

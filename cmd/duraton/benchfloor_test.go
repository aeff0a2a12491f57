package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchFloorCountsEveryExchange: the publish shape makes two exchanges per message
// and the workflow shape one per step plus one per run, every one of them answered;
// the figures are per operation.
func TestBenchFloorCountsEveryExchange(t *testing.T) {
	res, err := benchFloor(context.Background(), 200, 0, 8)
	require.NoError(t, err)
	require.Equal(t, "publish", res.Shape)
	require.Equal(t, 200, res.Ops)
	require.EqualValues(t, 400, res.Exchanges)
	require.Positive(t, res.OpsPerSec)
	require.Positive(t, res.CPUUsPerOp)
	require.Positive(t, res.RequestP50Ms)

	// 100 steps in runs of 3: 34 runs, 102 steps.
	res, err = benchFloor(context.Background(), 100, 3, 8)
	require.NoError(t, err)
	require.Equal(t, "workflow", res.Shape)
	require.Equal(t, 102, res.Ops)
	require.EqualValues(t, 34+102, res.Exchanges)
}

// TestBenchFloorCommand: the command prints one JSON line and refuses a bad shape.
func TestBenchFloorCommand(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runBenchFloor(context.Background(), []string{"--shape", "workflow", "--ops", "30", "--concurrency", "2", "--json"}, &out, io.Discard))
	var res floorResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.Equal(t, "step", res.Op)
	require.Equal(t, 30, res.Ops)

	err := runBenchFloor(context.Background(), []string{"--shape", "grpc"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, `--shape is publish or workflow, not "grpc"`)
}

package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchEventsSmall runs `duraton bench events` at a small size: every event fans out
// to all three workflows, each run is first delivered once, and the figures are filled.
func TestBenchEventsSmall(t *testing.T) {
	res, err := benchEvents(context.Background(), 60, 20, 3, 5, 3, func(int, int) {})
	require.NoError(t, err)
	require.Equal(t, 60, res.Events)
	require.Equal(t, 3, res.FanOut)
	require.Zero(t, res.DuplicateDelivs)
	require.Positive(t, res.AcceptedPerSec)
	require.Positive(t, res.RunsPerSec)
	require.Positive(t, res.LoadedP50Ms)
	require.Positive(t, res.LowLoadP50Ms)
	require.GreaterOrEqual(t, res.LowLoadP99Ms, res.LowLoadP50Ms)
}

// TestBenchWaitersSmall runs the correlated-wait case small: every event wakes exactly
// its own run (match and if alike), and the figures are filled.
func TestBenchWaitersSmall(t *testing.T) {
	res, err := benchWaiters(context.Background(), 40, 10, "async.data.ref == event.data.orderId && async.data.amount > 0", func(int, int) {})
	require.NoError(t, err)
	require.Equal(t, 40, res.Waiters)
	require.Equal(t, 10, res.Events)
	require.Zero(t, res.WrongWakes)
	require.Positive(t, res.P50Ms)
	require.Positive(t, res.MatchP50Ms)
	require.Positive(t, res.IfP50Ms)
	require.GreaterOrEqual(t, res.P99Ms, res.P50Ms)
}

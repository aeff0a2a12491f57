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

package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

func TestPackedIDRoundTripsAndKeepsOrder(t *testing.T) {
	t.Parallel()
	var g storage.IDGen
	now := time.Unix(1_700_000_000, 0)
	a, b := g.New(storage.PrefixMessage, now), g.New(storage.PrefixMessage, now)
	pa, pb := packID(a), packID(b)
	require.Empty(t, pa.raw, "a generated id packs into bytes")
	require.Equal(t, a, pa.String())
	require.True(t, pa.less(pb))
	require.False(t, pb.less(pa))
	odd := packID("custom-id")
	require.Equal(t, "custom-id", odd.String())
	require.Equal(t, a < "custom-id", pa.less(odd))
}

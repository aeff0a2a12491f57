package sdk

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReplayCache(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	c := NewReplayCache(2)
	require.True(t, c.accept("a", now.Unix()+300, now))
	require.False(t, c.accept("a", now.Unix()+300, now), "a replay inside the lifetime")
	require.True(t, c.accept("b", now.Unix()+100, now))
	require.True(t, c.accept("c", now.Unix()+300, now), "full: the token expiring first (b) is dropped")
	require.Len(t, c.seen, 2)
	require.False(t, c.accept("a", now.Unix()+300, now), "a is still remembered")

	later := now.Add(301 * time.Second)
	require.True(t, c.accept("a", later.Unix()+300, later), "an expired token is forgotten (it no longer verifies anyway)")
	require.Len(t, c.seen, 1)
}

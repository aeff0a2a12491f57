package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHookLimiterBoundsMemoryAndGroupsIPv6By64(t *testing.T) {
	now := time.Unix(0, 0)
	l := newHookLimiter(1, 2, 3, func() time.Time { return now })
	for range 2 {
		ok, _ := l.allow("2001:db8::1")
		require.True(t, ok)
	}
	ok, wait := l.allow("2001:db8::ffff") // same /64
	require.False(t, ok)
	require.Equal(t, time.Second, wait)
	ok, _ = l.allow("2001:db8:0:1::1") // another /64
	require.True(t, ok)

	// Three tracked addresses at most: a fourth evicts the least recently seen, not the
	// busy one.
	for range 2 {
		ok, _ = l.allow("192.0.2.1")
		require.True(t, ok)
	}
	ok, _ = l.allow("2001:db8::2") // touches the exhausted /64 again
	require.False(t, ok)
	ok, _ = l.allow("198.51.100.7") // evicts 2001:db8:0:1::/64
	require.True(t, ok)
	require.Len(t, l.clients, 3)
	require.Equal(t, 3, l.lru.Len())
	ok, _ = l.allow("::ffff:192.0.2.1") // IPv4-mapped is the IPv4 address: still exhausted
	require.False(t, ok)
	ok, _ = l.allow("2001:db8::3")
	require.False(t, ok, "the exhausted /64 was not evicted")
}

package authlimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFailedAuthLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	l := New(3, time.Minute, func() time.Time { return now })
	for i := 0; i < 3; i++ {
		blocked, _ := l.Blocked("192.0.2.10", "")
		require.False(t, blocked, "failure %d", i)
		l.Fail("192.0.2.10")
	}
	blocked, wait := l.Blocked("192.0.2.10", "")
	require.True(t, blocked)
	require.Equal(t, time.Minute, wait)
	blocked, _ = l.Blocked("192.0.2.11", "")
	require.False(t, blocked, "other addresses are not affected")

	now = now.Add(time.Minute)
	blocked, _ = l.Blocked("192.0.2.10", "")
	require.False(t, blocked, "the window passed")
}

func TestFailedAuthLimiterHardening(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }

	t.Run("FloodOfAddressesDoesNotReset", func(t *testing.T) {
		t.Parallel()
		l := New(3, time.Minute, clock)
		l.maxClients = 4
		for range 3 {
			l.Fail("198.51.100.7")
		}
		for i := range 50 {
			l.Fail(fmt.Sprintf("203.0.113.%d", i))
			blocked, _ := l.Blocked("198.51.100.7", "") // the attacker keeps trying
			require.True(t, blocked, "after %d other addresses", i+1)
			require.LessOrEqual(t, l.Len(), 4, "the table is bounded")
		}
	})

	t.Run("IPv6CountsPer64", func(t *testing.T) {
		t.Parallel()
		l := New(3, time.Minute, clock)
		for _, a := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff:ffff:ffff:9"} {
			l.Fail(a)
		}
		blocked, _ := l.Blocked("2001:db8:1:2::abcd", "")
		require.True(t, blocked, "the same /64")
		blocked, _ = l.Blocked("2001:db8:1:3::1", "")
		require.False(t, blocked, "another /64")

		for range 3 {
			l.Fail("::ffff:192.0.2.1")
		}
		blocked, _ = l.Blocked("192.0.2.1", "")
		require.True(t, blocked, "an IPv4-mapped address is its IPv4 address")
		blocked, _ = l.Blocked("192.0.2.2", "")
		require.False(t, blocked, "IPv4 counts per address")
	})
}

// TestFailedAuthLimiterRemembersGoodTokens: a blocked client may still use a token it
// authenticated with before (for goodFor), and only that one.
func TestFailedAuthLimiterRemembersGoodTokens(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	l := New(3, time.Minute, func() time.Time { return now })
	l.Succeeded("192.0.2.10", "good")
	for range 3 {
		l.Fail("192.0.2.10")
	}
	blocked, _ := l.Blocked("192.0.2.10", "good")
	require.False(t, blocked, "a token this client worked with")
	blocked, _ = l.Blocked("192.0.2.10", "other")
	require.True(t, blocked, "a token it never used")
	blocked, _ = l.Blocked("192.0.2.10", "")
	require.True(t, blocked, "no token")

	for i := range maxGoodTokens + 5 {
		l.Succeeded("198.51.100.1", fmt.Sprint("t", i))
	}
	require.Len(t, l.clients[ClientKey("198.51.100.1")].Value.(*client).good, maxGoodTokens, "bounded per client")

	now = now.Add(30 * time.Second)
	l.Fail("192.0.2.10") // the attacker keeps trying: the window does not restart
	now = now.Add(l.goodFor)
	for range 3 {
		l.Fail("192.0.2.10")
	}
	blocked, _ = l.Blocked("192.0.2.10", "good")
	require.True(t, blocked, "remembered for goodFor only")
}

package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFailedAuthLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	l := newFailedAuthLimiter(3, time.Minute, func() time.Time { return now })
	for i := 0; i < 3; i++ {
		blocked, _ := l.blocked("a")
		require.False(t, blocked, "failure %d", i)
		l.fail("a")
	}
	blocked, wait := l.blocked("a")
	require.True(t, blocked)
	require.Equal(t, time.Minute, wait)
	blocked, _ = l.blocked("b")
	require.False(t, blocked, "other addresses are not affected")

	now = now.Add(time.Minute)
	blocked, _ = l.blocked("a")
	require.False(t, blocked, "the window passed")
}

package flowctl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestGCRABurstThenSteady(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	var g GCRA
	// limit 4 per second: 4 at once from idle, then one every 250 ms.
	for i := range 4 {
		var ok bool
		g, ok, _ = g.Allow(4, time.Second, t0)
		require.True(t, ok, "burst start %d", i)
	}
	g2, ok, retry := g.Allow(4, time.Second, t0)
	require.False(t, ok)
	require.Equal(t, g, g2, "a refused start spends nothing")
	require.Equal(t, t0.Add(250*time.Millisecond), retry)
	_, ok, _ = g.Allow(4, time.Second, t0.Add(249*time.Millisecond))
	require.False(t, ok)
	g, ok, _ = g.Allow(4, time.Second, t0.Add(250*time.Millisecond))
	require.True(t, ok)
	_, ok, retry = g.Allow(4, time.Second, t0.Add(250*time.Millisecond))
	require.False(t, ok)
	require.Equal(t, t0.Add(500*time.Millisecond), retry)
	// Idle for a whole period: the full burst is back.
	later := t0.Add(2 * time.Second)
	require.True(t, g.Idle(later))
	for i := range 4 {
		g, ok, _ = g.Allow(4, time.Second, later)
		require.True(t, ok, "second burst start %d", i)
	}
	_, ok, _ = g.Allow(4, time.Second, later)
	require.False(t, ok)
}

// TestGCRANeverExceeds: whatever the arrival times, no interval of length d holds more
// than limit + d/T allowed starts (T = period/limit: the burst, then the steady rate), and
// a refused start's retry time is allowed.
func TestGCRANeverExceeds(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 20).Draw(t, "limit")
		period := time.Duration(rapid.Int64Range(1, 5000).Draw(t, "periodMs")) * time.Millisecond
		n := rapid.IntRange(1, 200).Draw(t, "events")
		now := time.Unix(1_700_000_000, 0)
		var g GCRA
		var allowed []time.Time
		for i := range n {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(period)/2+1).Draw(t, "gap")))
			next, ok, retry := g.Allow(limit, period, now)
			if !ok {
				require.Equal(t, g, next)
				require.True(t, retry.After(now))
				_, ok2, _ := g.Allow(limit, period, retry)
				require.True(t, ok2, "allowed at its retry time (event %d)", i)
				continue
			}
			g = next
			allowed = append(allowed, now)
			step := period / time.Duration(limit)
			for j, a := range allowed {
				in := len(allowed) - j // starts in [a, now]
				require.LessOrEqual(t, in, limit+int(now.Sub(a)/step), "starts in [%v, %v] (event %d)", a, now, i)
			}
		}
	})
}

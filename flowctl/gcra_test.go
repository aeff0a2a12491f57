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

// TestGCRAReserve: limit starts at once from idle, then one every period/limit; idle for
// a period brings the burst back; a booked start never precedes its booking.
func TestGCRAReserve(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var g GCRA
	var at []time.Duration
	for range 5 {
		var a time.Time
		g, a = g.Reserve(2, 10*time.Second, t0)
		at = append(at, a.Sub(t0))
	}
	require.Equal(t, []time.Duration{0, 0, 5 * time.Second, 10 * time.Second, 15 * time.Second}, at)
	// Idle long enough: burst again.
	later := t0.Add(time.Minute)
	g, a1 := g.Reserve(2, 10*time.Second, later)
	_, a2 := g.Reserve(2, 10*time.Second, later)
	require.Equal(t, later, a1)
	require.Equal(t, later, a2)
}

// TestGCRAReserveProperty: booked starts keep the GCRA bound (burst = limit, then one
// per period/limit), are never before their booking and come in booking order.
func TestGCRAReserveProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.IntRange(1, 5).Draw(t, "limit")
		period := time.Duration(rapid.Int64Range(1, 10_000).Draw(t, "periodMs")) * time.Millisecond
		now := time.Unix(0, 0)
		var g GCRA
		var starts []time.Time
		for range rapid.IntRange(1, 40).Draw(t, "n") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(period)).Draw(t, "gap")))
			var at time.Time
			g, at = g.Reserve(limit, period, now)
			if at.Before(now) {
				t.Fatalf("start %v booked before its booking %v", at, now)
			}
			if len(starts) > 0 && at.Before(starts[len(starts)-1]) {
				t.Fatalf("start %v before the previous %v", at, starts[len(starts)-1])
			}
			starts = append(starts, at)
		}
		// The GCRA bound: any j-i+1 consecutive starts span at least (j-i-limit+1)
		// emission intervals, so a burst is at most limit and the pace one per interval.
		iv := max(int64(period)/int64(limit), 1)
		for i := range starts {
			for j := i + limit; j < len(starts); j++ {
				if d := starts[j].Sub(starts[i]); int64(d) < int64(j-i-limit+1)*iv {
					t.Fatalf("starts %d and %d only %v apart (limit %d per %v): %v", i, j, d, limit, period, starts)
				}
			}
		}
	})
}

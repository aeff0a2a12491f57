package flowctl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// t0 is the origin of every test clock in this package.
var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

// The window is (now-period, now]: a start at s counts at every now in [s, s+period) and
// has left it at exactly s+period, so a start is allowed again at s+period, not after.
func TestWindow(t *testing.T) {
	t.Parallel()

	type step struct {
		at        time.Duration
		rate      int
		take      bool          // take when allowed
		wantOK    bool          // Allows
		wantRetry time.Duration // RetryAt offset when refused
		wantCount int           // Count after the step, over the step's period
	}
	const period = 2 * time.Second
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "BoundaryExactlyAtPeriod", steps: []step{
			{at: 0, rate: 3, take: true, wantOK: true, wantCount: 1},
			{at: 0, rate: 3, take: true, wantOK: true, wantCount: 2},
			{at: 0, rate: 3, take: true, wantOK: true, wantCount: 3},
			{at: 0, rate: 3, wantOK: false, wantRetry: 2 * time.Second, wantCount: 3},
			{at: 2*time.Second - time.Nanosecond, rate: 3, wantOK: false, wantRetry: 2 * time.Second, wantCount: 3},
			{at: 2 * time.Second, rate: 3, take: true, wantOK: true, wantCount: 1},
			{at: 2 * time.Second, rate: 3, take: true, wantOK: true, wantCount: 2},
			{at: 2 * time.Second, rate: 3, take: true, wantOK: true, wantCount: 3},
			{at: 2 * time.Second, rate: 3, wantOK: false, wantRetry: 4 * time.Second, wantCount: 3},
		}},
		{name: "RateDecreases", steps: []step{
			{at: 0, rate: 5, take: true, wantOK: true, wantCount: 1},
			{at: 100 * time.Millisecond, rate: 5, take: true, wantOK: true, wantCount: 2},
			{at: 200 * time.Millisecond, rate: 5, take: true, wantOK: true, wantCount: 3},
			// Three in the window, the rate drops to 2: the second-newest (100ms) must
			// leave first, so the retry is 100ms+2s.
			{at: 300 * time.Millisecond, rate: 2, wantOK: false, wantRetry: 2100 * time.Millisecond, wantCount: 3},
			{at: 2100 * time.Millisecond, rate: 2, take: true, wantOK: true, wantCount: 2},
			{at: 2100 * time.Millisecond, rate: 2, wantOK: false, wantRetry: 2200 * time.Millisecond, wantCount: 2},
			{at: 2200 * time.Millisecond, rate: 2, take: true, wantOK: true, wantCount: 2},
			{at: 2300 * time.Millisecond, rate: 2, wantOK: false, wantRetry: 4100 * time.Millisecond, wantCount: 2},
			// Raised again: the starts trimmed at rate 2 were outside the window already.
			{at: 2300 * time.Millisecond, rate: 5, take: true, wantOK: true, wantCount: 3},
		}},
		{name: "RateIncreases", steps: []step{
			{at: 0, rate: 1, take: true, wantOK: true, wantCount: 1},
			{at: time.Second, rate: 1, wantOK: false, wantRetry: 2 * time.Second, wantCount: 1},
			{at: time.Second, rate: 2, take: true, wantOK: true, wantCount: 2},
			{at: time.Second, rate: 2, wantOK: false, wantRetry: 2 * time.Second, wantCount: 2},
			{at: 2 * time.Second, rate: 2, take: true, wantOK: true, wantCount: 2},
			{at: 2 * time.Second, rate: 2, wantOK: false, wantRetry: 3 * time.Second, wantCount: 2},
		}},
		{name: "ZeroRateAlwaysAllows", steps: []step{
			{at: 0, rate: 0, wantOK: true},
			{at: 0, rate: 1, take: true, wantOK: true, wantCount: 1},
			{at: 0, rate: 0, wantOK: true, wantCount: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var w Window
			for i, s := range tt.steps {
				now := at(s.at)
				ok, retry := w.Allows(now, s.rate, period)
				require.Equal(t, s.wantOK, ok, "step %d", i)
				if ok {
					require.True(t, retry.IsZero(), "step %d", i)
					if s.take {
						w.Take(now, s.rate)
					}
				} else {
					require.Equal(t, at(s.wantRetry), retry, "step %d", i)
					ok, _ := w.Allows(retry, s.rate, period)
					require.True(t, ok, "step %d: allowed at its own retryAt", i)
				}
				require.Equal(t, s.wantCount, w.Count(now, period), "step %d", i)
				if ok && s.take {
					require.LessOrEqual(t, len(w.Starts()), s.rate, "step %d: keeps at most rate starts", i)
				}
			}
		})
	}
}

func TestWindowCountOldest(t *testing.T) {
	t.Parallel()
	var w Window
	require.Equal(t, 0, w.Count(t0, time.Second))
	require.True(t, w.Oldest(t0, time.Second).IsZero())
	for _, d := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
		w.Take(at(d), 10)
	}
	const period = 2 * time.Second
	tests := []struct {
		name       string
		now        time.Duration
		wantCount  int
		wantOldest time.Duration // -1: zero time
	}{
		{name: "AllIn", now: time.Second, wantCount: 3, wantOldest: 0},
		{name: "Empty", now: 3 * time.Second, wantCount: 0, wantOldest: -1},
		{name: "FirstLeavesAtPeriod", now: 2 * time.Second, wantCount: 2, wantOldest: 500 * time.Millisecond},
		{name: "JustBeforeFirstLeaves", now: 2*time.Second - time.Nanosecond, wantCount: 3, wantOldest: 0},
		{name: "LastOnly", now: 2500 * time.Millisecond, wantCount: 1, wantOldest: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := at(tt.now)
			require.Equal(t, tt.wantCount, w.Count(now, period))
			if tt.wantOldest < 0 {
				require.True(t, w.Oldest(now, period).IsZero())
			} else {
				require.Equal(t, at(tt.wantOldest), w.Oldest(now, period))
			}
		})
	}
}

func TestWindowTakeKeepsLastRate(t *testing.T) {
	t.Parallel()
	var w Window
	for i := range 10 {
		w.Take(at(time.Duration(i)*time.Millisecond), 3)
	}
	require.Equal(t, []int64{at(7 * time.Millisecond).UnixNano(), at(8 * time.Millisecond).UnixNano(), at(9 * time.Millisecond).UnixNano()}, w.Starts())

	w.Take(at(10*time.Millisecond), 0) // keep 0: no trim
	require.Len(t, w.Starts(), 4)
}

func TestWindowRestoreReset(t *testing.T) {
	t.Parallel()
	var w Window
	starts := []int64{at(0).UnixNano(), at(time.Second).UnixNano()}
	w.Restore(starts)
	starts[0] = 0 // Restore copies
	got := w.Starts()
	require.Equal(t, []int64{at(0).UnixNano(), at(time.Second).UnixNano()}, got)
	got[0] = 0 // Starts copies
	require.Equal(t, at(0).UnixNano(), w.Starts()[0])

	ok, retry := w.Allows(at(time.Second), 2, 5*time.Second)
	require.False(t, ok)
	require.Equal(t, at(5*time.Second), retry)

	w.Reset()
	require.Empty(t, w.Starts())
	ok, _ = w.Allows(at(time.Second), 2, 5*time.Second)
	require.True(t, ok)
}

func TestWindowMoveKeepsOrder(t *testing.T) {
	t.Parallel()
	var w Window
	base := time.Unix(100, 0)
	for i := 0; i < 3; i++ {
		w.Take(base.Add(time.Duration(i)*time.Second), 5)
	}
	w.Move(base.UnixNano(), base.Add(5*time.Second).UnixNano())
	require.Equal(t, []int64{base.Add(time.Second).UnixNano(), base.Add(2 * time.Second).UnixNano(), base.Add(5 * time.Second).UnixNano()}, w.Starts())
	w.Move(12345, 67890) // unknown start: no change
	require.Len(t, w.Starts(), 3)
}

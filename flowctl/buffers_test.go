package flowctl

import (
	"testing"

	"pgregory.net/rapid"
)

// TestDebounceDeadlineProperty: a burst fires periodMs after its last event, never later
// than timeoutMs after its first, and an event never moves the deadline earlier than the
// previous one unless the cap does.
func TestDebounceDeadlineProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		period := rapid.Int64Range(1000, 7*86400000).Draw(t, "period")
		timeout := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(period, 8*86400000)).Draw(t, "timeout")
		first := rapid.Int64Range(0, 1<<40).Draw(t, "first")
		now, prev := first, int64(0)
		for i := range rapid.IntRange(1, 20).Draw(t, "events") {
			d := DebounceDeadline(first, now, period, timeout)
			if d > now+period {
				t.Fatalf("deadline %d later than periodMs after the last event %d", d, now)
			}
			if timeout > 0 && d > first+timeout {
				t.Fatalf("deadline %d past the cap %d", d, first+timeout)
			}
			if timeout == 0 && d != now+period {
				t.Fatalf("without a cap the deadline is periodMs after the last event: %d != %d", d, now+period)
			}
			if i > 0 && d < prev && d != first+timeout {
				t.Fatalf("deadline moved earlier (%d < %d) without the cap", d, prev)
			}
			prev = d
			// The next event comes before the burst fires (else it starts a new burst).
			if d <= now {
				return
			}
			now += rapid.Int64Range(0, d-now-1).Draw(t, "gap")
		}
	})
}

func TestDebounceDeadline(t *testing.T) {
	tests := []struct{ first, now, period, timeout, want int64 }{
		{0, 0, 5000, 0, 5000},
		{0, 4000, 5000, 0, 9000},       // slides
		{0, 4000, 5000, 7000, 7000},    // capped by timeoutMs after the first
		{1000, 1000, 5000, 5000, 6000}, // cap equals period
		{0, 100000, 5000, 7000, 7000},  // cap passed: due
	}
	for _, tt := range tests {
		if got := DebounceDeadline(tt.first, tt.now, tt.period, tt.timeout); got != tt.want {
			t.Errorf("DebounceDeadline(%d, %d, %d, %d) = %d, want %d", tt.first, tt.now, tt.period, tt.timeout, got, tt.want)
		}
	}
	if got := BatchDeadline(1000, 5000); got != 6000 {
		t.Errorf("BatchDeadline = %d", got)
	}
}

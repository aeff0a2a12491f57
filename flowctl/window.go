package flowctl

import "time"

// Window is an exact sliding-window log of start times: a rate of R per period P admits a
// start at t only if fewer than R starts happened in (t-P, t]. It keeps at most the last
// R starts (older ones can never matter), so its memory is bounded by the rate.
type Window struct {
	starts []int64 // unix ns, oldest first; a ring would save copies, the rates here are small
	// span is the longest period a recorded start was counted under (Rate.Take sets it),
	// so a key whose deliveries are all gone still knows how long its starts matter. Zero
	// when unknown (Window.Take called directly, or restored starts).
	span time.Duration
}

// Count is the number of starts in (now-period, now].
func (w *Window) Count(now time.Time, period time.Duration) int {
	from := now.Add(-period).UnixNano()
	n := 0
	for _, s := range w.starts {
		if s > from {
			n++
		}
	}
	return n
}

// Allows reports whether a start at now keeps the window within rate per period; if not,
// it returns the earliest time a start will be allowed.
func (w *Window) Allows(now time.Time, rate int, period time.Duration) (bool, time.Time) {
	if rate <= 0 {
		return true, time.Time{}
	}
	from := now.Add(-period).UnixNano()
	inWindow := w.starts
	for len(inWindow) > 0 && inWindow[0] <= from {
		inWindow = inWindow[1:]
	}
	if len(inWindow) < rate {
		return true, time.Time{}
	}
	// The start that must leave the window before another fits.
	oldest := inWindow[len(inWindow)-rate]
	return false, time.Unix(0, oldest).Add(period)
}

// Take records a start at now, keeping at most keep starts.
func (w *Window) Take(now time.Time, keep int) {
	w.starts = append(w.starts, now.UnixNano())
	if keep > 0 && len(w.starts) > keep {
		w.starts = append(w.starts[:0], w.starts[len(w.starts)-keep:]...)
	}
}

// Move changes a recorded start from `from` to the later time `to` (when the delivery
// was admitted at `from` but left at `to`), keeping the starts in order.
func (w *Window) Move(from, to int64) {
	for i, s := range w.starts {
		if s == from {
			w.starts[i] = to
			for j := i; j+1 < len(w.starts) && w.starts[j] > w.starts[j+1]; j++ {
				w.starts[j], w.starts[j+1] = w.starts[j+1], w.starts[j]
			}
			return
		}
	}
}

// Starts returns the recorded starts, oldest first (for persistence).
func (w *Window) Starts() []int64 { return append([]int64(nil), w.starts...) }

// Restore replaces the window's starts (from persistence), oldest first.
func (w *Window) Restore(starts []int64) { w.starts = append(w.starts[:0], starts...) }

// Reset forgets every start.
func (w *Window) Reset() { w.starts, w.span = w.starts[:0], 0 }

// matters reports whether a recorded start may still count against a rate at now: one
// lies within the longest period the starts were counted under, or within MaxPeriod when
// that period is unknown.
func (w *Window) matters(now time.Time, period time.Duration) bool {
	if len(w.starts) == 0 {
		return false
	}
	span := max(w.span, period)
	if w.span == 0 {
		span = MaxPeriod
	}
	return w.Count(now, span) > 0
}

// Oldest is the oldest start in (now-period, now], or the zero time.
func (w *Window) Oldest(now time.Time, period time.Duration) time.Time {
	from := now.Add(-period).UnixNano()
	for _, s := range w.starts {
		if s > from {
			return time.Unix(0, s)
		}
	}
	return time.Time{}
}

// Remove forgets the start at `at` (a delivery admitted at `at` whose request never left).
func (w *Window) Remove(at int64) {
	for i, s := range w.starts {
		if s == at {
			w.starts = append(w.starts[:i], w.starts[i+1:]...)
			return
		}
	}
}

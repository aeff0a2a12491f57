package flowctl

import "time"

// GCRA is the state of one generic cell rate algorithm scope (throttle, rateLimit): the
// theoretical arrival time of the next start, in unix nanoseconds. The zero value is idle.
//
// With limit L per period P the emission interval is T = P/L and the burst tolerance
// (L−1)·T: from idle L starts pass at once, then one every T.
type GCRA struct {
	TAT int64 `json:"tat"`
}

// Allow decides one start at now. It returns the state to keep, whether the start may
// go, and, when it may not, the earliest time it could. A refused start leaves the state
// unchanged (it spends nothing).
func (g GCRA) Allow(limit int, period time.Duration, now time.Time) (next GCRA, ok bool, retryAt time.Time) {
	if limit < 1 || period <= 0 {
		return g, true, time.Time{}
	}
	t := int64(period) / int64(limit)
	if t < 1 {
		t = 1
	}
	tau := t * int64(limit-1)
	n := now.UnixNano()
	tat := max(g.TAT, n)
	if allowAt := tat - tau; n < allowAt {
		return g, false, time.Unix(0, allowAt)
	}
	return GCRA{TAT: tat + t}, true, time.Time{}
}

// Idle reports whether the scope is back to its full burst at now (its state need not
// be kept).
func (g GCRA) Idle(now time.Time) bool { return g.TAT <= now.UnixNano() }

// Reserve books one start at now that may be delayed (throttle): it returns the state to
// keep and when the start may go, never before now. Starts booked from one state keep
// Allow's pace: limit at once from idle, then one every period/limit.
func (g GCRA) Reserve(limit int, period time.Duration, now time.Time) (next GCRA, at time.Time) {
	if limit < 1 || period <= 0 {
		return g, now
	}
	t := max(int64(period)/int64(limit), 1)
	tau := t * int64(limit-1)
	n := now.UnixNano()
	tat := max(g.TAT, n)
	return GCRA{TAT: tat + t}, time.Unix(0, max(n, tat-tau))
}

package sched

import (
	"strconv"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// A native workflow's tokenThrottle (docs/protocol.md, "AI steps and spend controls") is
// a token bucket per scope, kept as a GCRA state in the start gates' map: TAT is when the
// bucket is full again, so its level at now is tokens − (TAT − now) × tokens/perMs
// (capped at tokens). A run's first delivery is admitted only while the level is above
// zero; its start reserves the scope's average tokens per run so far (before one is
// known: the declared estimate). A scope with neither starts one run at a time until a run
// has ended with tokens, so a fresh key cannot start a crowd against a bucket it knows
// nothing about (after a restart, one more may start before the first ends: the count is
// in memory). The engine debits each AI step's actual usage (AdjustTokens) and gives the
// reservation back when the run ends, so the bucket may go into debt, which delays the
// scope's next starts; nothing fails or pauses.

// tokenConstraint is a run's token gate.
type tokenConstraint struct {
	s  *Scheduler
	id flowID
	g  *storage.TokenGate
}

func (c *tokenConstraint) Check(now time.Time) (bool, time.Time) {
	if c.probing() && c.s.flow.tokenProbe[c.id] > 0 {
		return false, time.Time{} // woken when a run of the scope ends (AdjustTokens)
	}
	tat := c.s.flow.gates[c.id].TAT
	if tat-now.UnixNano() < c.g.Window() {
		return true, time.Time{}
	}
	// Above zero from the first instant after TAT − window.
	return false, time.Unix(0, tat-c.g.Window()+1)
}

// probing reports whether a start would learn the scope's tokens per run: no average is
// known and no estimate declared.
func (c *tokenConstraint) probing() bool {
	return c.s.flow.tokenAvg[c.id] <= 0 && c.g.Estimate <= 0
}

// Take books the start's reservation: the scope's average tokens per run so far, or the
// declared estimate; without either the start is the scope's probe.
func (c *tokenConstraint) Take(now time.Time) {
	switch avg := c.s.flow.tokenAvg[c.id]; {
	case avg > 0:
		c.s.adjustTokens(c.id, c.g.Debit(avg), now)
	case c.g.Estimate > 0:
		c.s.adjustTokens(c.id, c.g.Debit(c.g.Estimate), now)
	default:
		c.s.flow.tokenProbe[c.id]++
	}
}

func (c *tokenConstraint) Release() {}

func (c *tokenConstraint) String() string {
	if c.probing() && c.s.flow.tokenProbe[c.id] > 0 {
		return "waiting for AI tokens: tokenThrottle starts one run at a time until a run of the scope has ended (no average tokens per run yet, no estimate)"
	}
	return "waiting for AI tokens: tokenThrottle bucket of " + strconv.FormatInt(c.g.Tokens, 10) + " tokens per " +
		(time.Duration(c.g.PerMs) * time.Millisecond).String() + " is empty"
}

// adjustTokens shifts a bucket's TAT by d ns: a debit (d > 0) counts from now at the
// earliest (a full bucket does not bank time), a credit (d < 0) moves it back.
func (s *Scheduler) adjustTokens(id flowID, d int64, now time.Time) {
	g := s.flow.gates[id]
	if d > 0 {
		g.TAT = max(g.TAT, now.UnixNano()) + d
	} else {
		g.TAT += d
	}
	if g.TAT <= now.UnixNano() {
		delete(s.flow.gates, id) // full: a missing state is a full bucket
		return
	}
	s.flow.gates[id] = g
}

// AdjustTokens applies an AI step's usage (d > 0) or a reservation given back (d < 0),
// as a TAT shift in ns (storage.TokenGate.Debit), to a bucket; avg ≥ 0 replaces the
// scope's average tokens per run (a run ended), -1 keeps it. A credit checks again at
// once the starts waiting for the bucket (their timers were set for the earlier level).
func (s *Scheduler) AdjustTokens(project, key string, d, avg int64, now time.Time, starts *[]Start) {
	id := flowID{project, key}
	if d != 0 {
		s.adjustTokens(id, d, now)
	}
	if avg >= 0 {
		s.flow.tokenAvg[id] = avg
		if s.flow.tokenProbe[id] > 1 {
			s.flow.tokenProbe[id]--
		} else {
			delete(s.flow.tokenProbe, id)
		}
	}
	if d < 0 || avg >= 0 {
		waiting := s.flow.tokenWait[id]
		delete(s.flow.tokenWait, id)
		for q := range waiting {
			s.pump(q, now, -1, time.Time{}, starts)
		}
	}
}

// noteTokenWait remembers a queue whose head a token bucket blocked, so that a credit to
// the bucket wakes it. A queue admitted meanwhile is forgotten at the bucket's next credit.
func (s *Scheduler) noteTokenWait(q *flowQueue, by flowctl.Constraint) {
	tc, ok := by.(*tokenConstraint)
	if !ok {
		return
	}
	w := s.flow.tokenWait[tc.id]
	if w == nil {
		w = map[*flowQueue]struct{}{}
		s.flow.tokenWait[tc.id] = w
	}
	w[q] = struct{}{}
}

// TokenState is a bucket's state as the scheduler holds it: when it is full again.
func (s *Scheduler) TokenState(project, key string) flowctl.GCRA {
	return s.flow.gates[flowID{project, key}]
}

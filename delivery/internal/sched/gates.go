package sched

import (
	"strconv"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// This file holds what one delivery may ask beyond its waitlist's own key
// (docs/protocol.md, "Controls"): the slots of further keys (a native workflow's second
// concurrency constraint) and a run's start gate (a native throttle). They are checked
// with the key's constraints in one admission, so a delivery blocked by any of them
// spends nothing on the others.

// itemExtras is what a waiting delivery asks beyond its key; nil for almost all of them.
type itemExtras struct {
	gate    *storage.StartGate
	tokens  *storage.TokenGate // tokengate.go
	extra   []storage.ExtraKey
	shiftMs int64
}

func extrasOf(e storage.DueEntry) *itemExtras {
	if e.Gate == nil && e.Tokens == nil && len(e.Extra) == 0 && e.ShiftMs == 0 {
		return nil
	}
	return &itemExtras{gate: e.Gate, tokens: e.Tokens, extra: e.Extra, shiftMs: e.ShiftMs}
}

func (s *Scheduler) extraKey(project, key string) *flowctl.Key {
	id := flowID{project, key}
	k := s.flow.extra[id]
	if k == nil {
		k = flowctl.NewKey(key)
		s.flow.extra[id] = k
		s.flow.keys[project]++ // held in memory like a waitlist: counted for MaxFlowKeys
	}
	return k
}

func (s *Scheduler) dropExtraIfIdle(project, key string, now time.Time) {
	id := flowID{project, key}
	if k := s.flow.extra[id]; k != nil && k.Idle(now) && len(s.flow.rings[ringOfSlot(project, key)]) == 0 {
		delete(s.flow.extra, id)
		if s.flow.keys[project]--; s.flow.keys[project] <= 0 {
			delete(s.flow.keys, project)
		}
	}
}

func ringOfSlot(project, key string) string { return "slot:" + project + "\x00" + key }

func limitsOfExtra(x storage.ExtraKey) flowctl.Limits {
	return flowctl.Limits{Parallelism: x.Parallelism, Period: flowctl.DefaultPeriod}
}

func (s *Scheduler) askExtras(project string, extras []storage.ExtraKey) {
	for _, x := range extras {
		s.extraKey(project, x.Key).Ask(limitsOfExtra(x))
	}
}

func (s *Scheduler) unaskExtras(project string, extras []storage.ExtraKey, now time.Time) {
	for _, x := range extras {
		if k := s.flow.extra[flowID{project, x.Key}]; k != nil {
			k.Unask(limitsOfExtra(x))
			s.dropExtraIfIdle(project, x.Key, now)
		}
	}
}

// headConstraints are the constraints of q's head beyond the key's own.
func (s *Scheduler) headConstraints(q *flowQueue, head waitItem, cs []flowctl.Constraint) []flowctl.Constraint {
	if head.x == nil {
		return cs
	}
	for _, x := range head.x.extra {
		cs = append(cs, flowctl.Parallelism{K: s.extraKey(q.id.project, x.Key)})
	}
	if g := head.x.gate; g != nil {
		cs = append(cs, &gateConstraint{s: s, id: flowID{q.id.project, g.Key}, g: g})
	}
	if g := head.x.tokens; g != nil {
		cs = append(cs, &tokenConstraint{s: s, id: flowID{q.id.project, g.Key}, g: g})
	}
	return cs
}

// releaseExtras returns the further slots a started delivery held, and lets the keys
// that wait for them take turns.
func (s *Scheduler) releaseExtras(e storage.DueEntry, now time.Time, starts *[]Start) {
	for _, x := range e.Extra {
		k := s.flow.extra[flowID{e.Project, x.Key}]
		if k == nil {
			continue
		}
		flowctl.Parallelism{K: k}.Release()
		k.Unask(limitsOfExtra(x))
		room := func() bool { ok, _ := (flowctl.Parallelism{K: k}).Check(now); return ok }
		s.pumpRing(ringOfSlot(e.Project, x.Key), now, room, starts)
		s.dropExtraIfIdle(e.Project, x.Key, now)
	}
}

// gateConstraint is a run's start gate: a GCRA over the scope's run starts. Take books
// the start in the scheduler; the caller makes it durable before the request leaves
// (Admission.GateKey, GateTAT).
type gateConstraint struct {
	s  *Scheduler
	id flowID
	g  *storage.StartGate
}

func (c *gateConstraint) Check(now time.Time) (bool, time.Time) {
	_, ok, at := c.s.flow.gates[c.id].Allow(c.g.Limit, c.g.Period(), now)
	return ok, at
}

func (c *gateConstraint) Take(now time.Time) {
	next, _, _ := c.s.flow.gates[c.id].Allow(c.g.Limit, c.g.Period(), now)
	c.s.flow.gates[c.id] = next
}

func (c *gateConstraint) Release() {}

func (c *gateConstraint) String() string {
	return "throttled: at most " + strconv.Itoa(c.g.Limit) + " run starts per " + c.g.Period().String()
}

// RestoreGate gives a start gate its stored state (at start-up).
func (s *Scheduler) RestoreGate(project, key string, g flowctl.GCRA) {
	s.flow.gates[flowID{project, key}] = g
}

// sweepGates forgets gate states that are idle again (their full burst is back): they
// need not be kept, as a missing state is an idle one.
func (s *Scheduler) sweepGates(now time.Time) {
	for id, g := range s.flow.gates {
		if g.Idle(now) {
			delete(s.flow.gates, id)
		}
	}
}

// gateSweepEvery is how many gated admissions pass between sweeps of idle gate states.
const gateSweepEvery = 1024

// blockingExtra names the further key whose slot blocked q's head ("" when it was not one).
func (s *Scheduler) blockingExtra(q *flowQueue, head waitItem, by flowctl.Constraint) string {
	if head.x == nil {
		return ""
	}
	for _, x := range head.x.extra {
		if by == flowctl.Constraint(flowctl.Parallelism{K: s.extraKey(q.id.project, x.Key)}) {
			return x.Key
		}
	}
	return ""
}

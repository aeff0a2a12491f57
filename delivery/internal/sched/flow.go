package sched

import (
	"container/heap"
	"sort"
	"time"

	"github.com/google/btree"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// This file is flow control (docs/protocol.md, "Flow control"). A due delivery that has a
// flow-control key, or whose project has a concurrency ceiling, joins its key's waitlist;
// the head of a waitlist starts when flowctl admits it over every constraint (the key's
// parallelism and rate, the project ceiling, the engine's own cap). A blocked head waits
// for the release of a slot or for the time its rate allows; it is never found by
// scanning. Keys that compete for a shared limit (the ceiling, the engine cap) take
// turns, one start per turn.

// flowID names a waitlist: a project's flow-control key ("" for the project's deliveries
// without a key, which only the ceiling limits).
type flowID struct{ project, key string }

// flowQueue is one key's waitlist and state.
type flowQueue struct {
	id      flowID
	key     *flowctl.Key
	waiting *btree.BTreeG[waitItem]

	blockedBy    string    // the constraint the head waits for ("" when not blocked)
	blockedSince time.Time // since when the head waits for it
	timerAt      int64     // scheduled wake-up, unix ns (0: none)
	ring         string    // the shared-limit ring the queue waits in ("": none)
	rank         int64     // its place in that ring: joined at (unix ms) − its head's shift
}

// waitItem is a delivery in a waitlist, kept small and almost free of pointers: a
// waitlist may hold millions of them, and what the garbage collector must scan grows
// with every pointer. The project and key are the waitlist's; the message id is packed.
type waitItem struct {
	orderAt int64
	dueAt   int64
	id      packedID
	limits  flowctl.Limits
	since   int64  // unix ns it joined the waitlist
	queue   string // the message's queue, usually ""
	x       *itemExtras
}

// lessWait orders a waitlist: older runs first, then by message id (publication order).
func lessWait(a, b waitItem) bool {
	if a.orderAt != b.orderAt {
		return a.orderAt < b.orderAt
	}
	return a.id.less(b.id)
}

func newWaitItem(e storage.DueEntry, now time.Time) waitItem {
	return waitItem{orderAt: e.OrderAt, dueAt: e.DueAt, id: packID(e.MessageID), limits: e.Limits, since: now.UnixNano(), queue: e.Queue, x: extrasOf(e)}
}

// entry rebuilds the due entry of a waiting delivery of q.
func (w waitItem) entry(q *flowQueue) storage.DueEntry {
	e := storage.DueEntry{DueAt: w.dueAt, MessageID: w.id.String(), Project: q.id.project, Queue: w.queue,
		FlowKey: q.id.key, Limits: w.limits, OrderAt: w.orderAt}
	if w.x != nil {
		e.Gate, e.Extra, e.ShiftMs = w.x.gate, w.x.extra, w.x.shiftMs
	}
	return e
}

// shiftMs is a waiting delivery's priority shift.
func (w waitItem) shiftMs() int64 {
	if w.x == nil {
		return 0
	}
	return w.x.shiftMs
}

const ringEngine = "engine"

func ringOfProject(p string) string { return "project:" + p }

// flowState is the scheduler's flow-control state.
type flowState struct {
	queues    map[flowID]*flowQueue
	ceilings  map[string]*flowctl.Ceiling
	inFlight  map[string]int          // per project, every delivery (for globalParallelism)
	keys      map[string]int          // per project, the flow-control keys held (waitlists with a key)
	rings     map[string][]*flowQueue // each ordered by rank
	timers    timerHeap
	extra     map[flowID]*flowctl.Key            // further keys' slots (gates.go)
	gates     map[flowID]flowctl.GCRA            // start gates' states (gates.go)
	gateTakes int                                // admissions through a gate since the last sweep
	tokenAvg  map[flowID]int64                   // tokenThrottle scopes' average tokens per run (tokengate.go)
	tokenWait map[flowID]map[*flowQueue]struct{} // queues whose head waits for a bucket (tokengate.go)
	// tokenProbe counts runs started on a scope that knew no average and declared no
	// estimate, not yet ended: while one is, the scope starts no other (tokengate.go).
	tokenProbe map[flowID]int
}

func newFlowState() flowState {
	return flowState{
		queues: map[flowID]*flowQueue{}, ceilings: map[string]*flowctl.Ceiling{},
		inFlight: map[string]int{}, keys: map[string]int{}, rings: map[string][]*flowQueue{},
		extra: map[flowID]*flowctl.Key{}, gates: map[flowID]flowctl.GCRA{}, tokenAvg: map[flowID]int64{},
		tokenWait: map[flowID]map[*flowQueue]struct{}{}, tokenProbe: map[flowID]int{},
	}
}

func (s *Scheduler) ceiling(project string) *flowctl.Ceiling {
	c := s.flow.ceilings[project]
	if c == nil {
		limit := s.cfg.ProjectShare
		if s.cfg.ProjectCeiling > 0 {
			limit = min(limit, s.cfg.ProjectCeiling)
		}
		c = &flowctl.Ceiling{Scope: project, Limit: limit}
		s.flow.ceilings[project] = c
	}
	return c
}

// needsFlow reports whether an entry goes through a waitlist: it has a flow-control
// key, its project has a ceiling, or its project is at its share of the engine (or has
// unkeyed deliveries waiting, which it must not overtake).
func (s *Scheduler) needsFlow(e storage.DueEntry) bool {
	if e.Timer {
		return false
	}
	if e.FlowKey != "" || e.Gate != nil || e.Tokens != nil || s.cfg.ProjectCeiling > 0 {
		return true
	}
	if c := s.ceiling(e.Project); c.InFlight >= c.Limit {
		return true
	}
	q := s.flow.queues[flowID{e.Project, ""}]
	return q != nil && q.waiting.Len() > 0
}

func (s *Scheduler) queue(id flowID) *flowQueue {
	q := s.flow.queues[id]
	if q == nil {
		q = &flowQueue{id: id, key: flowctl.NewKey(id.key), waiting: btree.NewG(16, lessWait)}
		s.flow.queues[id] = q
		if id.key != "" {
			s.flow.keys[id.project]++
		}
	}
	return q
}

// enqueueFlow puts a due entry in its waitlist and tries to start the head.
func (s *Scheduler) enqueueFlow(e storage.DueEntry, now time.Time, starts *[]Start) {
	q := s.queue(flowID{e.Project, e.FlowKey})
	if e.FlowKey != "" {
		q.key.Ask(e.Limits)
	}
	s.askExtras(e.Project, e.Extra)
	q.waiting.ReplaceOrInsert(newWaitItem(e, now))
	s.pump(q, now, -1, time.Time{}, starts)
}

// constraints lists what a start from q must be admitted by.
func (s *Scheduler) constraints(q *flowQueue) []flowctl.Constraint {
	cs := make([]flowctl.Constraint, 0, 3)
	if q.id.key != "" {
		cs = append(cs, flowctl.Parallelism{K: q.key}, flowctl.Rate{K: q.key})
	}
	if c := s.ceiling(q.id.project); c.Limit > 0 {
		cs = append(cs, c)
	}
	return cs
}

// pump starts heads of q while they are admitted, at most limit of them (-1: no limit);
// wokenAt is the release that caused it (zero: none). A blocked head leaves q waiting
// for its blocker: a timer for a rate, a turn in the shared ring for the ceiling or the
// engine cap, or a release of the key's own slot.
func (s *Scheduler) pump(q *flowQueue, now time.Time, limit int, wokenAt time.Time, starts *[]Start) {
	for started := 0; !s.stopping && q.waiting.Len() > 0 && (limit < 0 || started < limit); started++ {
		if s.inFlight >= s.cfg.MaxInFlight {
			s.block(q, "engine in-flight cap", now)
			s.joinRing(q, ringEngine, now)
			return
		}
		head, _ := q.waiting.Min()
		dec := flowctl.Admit(now, s.headConstraints(q, head, s.constraints(q))...)
		if !dec.Admitted {
			s.block(q, dec.BlockedBy.String(), now)
			s.noteTokenWait(q, dec.BlockedBy) // tokengate.go
			switch {
			case !dec.RetryAt.IsZero():
				s.wakeAt(q, dec.RetryAt)
			case dec.BlockedBy == flowctl.Constraint(s.ceiling(q.id.project)):
				s.joinRing(q, ringOfProject(q.id.project), now)
			default:
				if x := s.blockingExtra(q, head, dec.BlockedBy); x != "" {
					s.joinRing(q, ringOfSlot(q.id.project, x), now)
				}
			}
			return // a key slot: the release of one pumps q again
		}
		q.waiting.DeleteMin()
		q.blockedBy, q.blockedSince = "", time.Time{}
		adm := Admission{flow: q, WokenAt: wokenAt}
		if e := q.key.Effective(); q.id.key != "" && e.Rate > 0 {
			adm.RateStart, adm.RatePeriod = now.UnixNano(), e.Period
		}
		if head.x != nil && head.x.gate != nil {
			adm.GateKey = head.x.gate.Key
			adm.GateTAT = s.flow.gates[flowID{q.id.project, adm.GateKey}].TAT
			if s.flow.gateTakes++; s.flow.gateTakes >= gateSweepEvery {
				s.flow.gateTakes = 0
				s.sweepGates(now)
			}
		}
		if head.x != nil && head.x.tokens != nil {
			adm.TokenKey = head.x.tokens.Key
			adm.TokenReserve = s.flow.tokenAvg[flowID{q.id.project, adm.TokenKey}]
			if adm.TokenReserve <= 0 {
				adm.TokenReserve = head.x.tokens.Estimate // none known yet: the declared one
			}
		}
		*starts = append(*starts, s.start(head.entry(q), adm))
	}
	if q.waiting.Len() > 0 && limit >= 0 {
		// A turn taken from a ring: go to the back of it so other keys get theirs.
		ring := s.ringWanted(q)
		reason := "engine in-flight cap"
		if ring != ringEngine {
			reason = s.ceiling(q.id.project).String()
		}
		s.block(q, reason, now)
		s.joinRing(q, ring, now)
	}
}

// MoveRateStart moves an admitted delivery's rate start to the time it is sent and
// returns that time.
func (s *Scheduler) MoveRateStart(adm *Admission, at time.Time) int64 {
	to := max(at.UnixNano(), adm.RateStart)
	adm.flow.key.Window.Move(adm.RateStart, to)
	adm.RateStart = to
	return to
}

// forgetWaiting removes a message from its waitlist, so the key's waitlist size is right
// even while the key cannot start anything.
func (s *Scheduler) forgetWaiting(e storage.DueEntry, now time.Time) {
	q := s.flow.queues[flowID{e.Project, e.FlowKey}]
	if q == nil {
		return
	}
	if item, found := q.waiting.Delete(newWaitItem(e, time.Time{})); found {
		if q.id.key != "" {
			q.key.Unask(item.limits)
		}
		if item.x != nil {
			s.unaskExtras(q.id.project, item.x.extra, now)
		}
		s.evictIfIdle(q, now)
	}
}

// ringWanted is the ring q waits in after a turn: the project's when the project is at
// its limit (a configured ceiling, or its share of the engine), else the engine's — the
// ring whose releases can let it go on.
func (s *Scheduler) ringWanted(q *flowQueue) string {
	if c := s.ceiling(q.id.project); c.InFlight >= c.Limit {
		return ringOfProject(q.id.project)
	}
	return ringEngine
}

func (s *Scheduler) block(q *flowQueue, by string, now time.Time) {
	if q.blockedBy != by {
		q.blockedBy, q.blockedSince = by, now
	}
}

// joinRing puts q in ring at (now − its head's priority shift): the ring serves the
// earliest, so with no shifts keys take turns in the order they came (docs/protocol.md,
// "Flow control": keys take turns at the project ceiling).
func (s *Scheduler) joinRing(q *flowQueue, ring string, now time.Time) {
	if q.ring != "" {
		return
	}
	q.ring = ring
	q.rank = now.UnixMilli()
	if head, ok := q.waiting.Min(); ok {
		q.rank -= head.shiftMs()
	}
	r := s.flow.rings[ring]
	i := sort.Search(len(r), func(i int) bool { return r[i].rank > q.rank })
	r = append(r, nil)
	copy(r[i+1:], r[i:])
	r[i] = q
	s.flow.rings[ring] = r
}

// pumpRing gives each queue waiting in ring one start, in turn, while there is room.
func (s *Scheduler) pumpRing(ring string, now time.Time, room func() bool, starts *[]Start) {
	for n := len(s.flow.rings[ring]); n > 0 && room(); n-- {
		q := s.flow.rings[ring][0]
		s.flow.rings[ring] = s.flow.rings[ring][1:]
		q.ring = ""
		s.pump(q, now, 1, time.Time{}, starts)
	}
	if len(s.flow.rings[ring]) == 0 {
		delete(s.flow.rings, ring)
	}
}

// releaseFlow returns a delivery's flow slots and lets the next deliveries start.
func (s *Scheduler) releaseFlow(st Start, now time.Time, starts *[]Start) {
	if q := st.flow; q != nil {
		flowctl.Release(s.constraints(q)...)
		if q.id.key != "" {
			q.key.Unask(st.Entry.Limits)
		}
		s.releaseExtras(st.Entry, now, starts)
		// The waitlist of deliveries without a key holds no slot of its own, so it may
		// have been dropped as idle and made anew while this one was in flight: the
		// release pumps the live one.
		if live := s.flow.queues[q.id]; live != nil {
			q = live
		}
		ring := ringOfProject(q.id.project)
		if c := s.ceiling(q.id.project); s.cfg.ProjectCeiling > 0 || len(s.flow.rings[ring]) > 0 {
			// The freed slot of the project is contended: q takes its turn behind the
			// keys that were already waiting for one, so a busy key cannot starve the
			// others.
			if q.waiting.Len() > 0 {
				s.block(q, c.String(), now)
				s.joinRing(q, ringOfProject(q.id.project), now)
			}
			s.pumpRing(ringOfProject(q.id.project), now, func() bool { return c.InFlight < c.Limit }, starts)
		} else {
			s.pump(q, now, -1, now, starts)
		}
		s.evictIfIdle(q, now)
	}
	s.pumpRing(ringEngine, now, func() bool { return s.inFlight < s.cfg.MaxInFlight }, starts)
}

// evictIfIdle drops a waitlist that holds nothing, so memory follows the active keys.
func (s *Scheduler) evictIfIdle(q *flowQueue, now time.Time) {
	if s.flow.queues[q.id] != q {
		return // already dropped (a stale pointer from an admission): the map's is another
	}
	if q.waiting.Len() == 0 && q.ring == "" && q.timerAt == 0 && q.key.Idle(now) {
		delete(s.flow.queues, q.id)
		if q.id.key != "" {
			if s.flow.keys[q.id.project]--; s.flow.keys[q.id.project] <= 0 {
				delete(s.flow.keys, q.id.project)
			}
		}
	}
}

// wakeAt schedules q to be pumped at t.
func (s *Scheduler) wakeAt(q *flowQueue, t time.Time) {
	at := t.UnixNano()
	if q.timerAt != 0 && q.timerAt <= at {
		return
	}
	q.timerAt = at
	heap.Push(&s.flow.timers, timerItem{at: at, q: q})
}

// fireTimers pumps the queues whose wake-up time has come.
func (s *Scheduler) fireTimers(now time.Time, starts *[]Start) {
	for s.flow.timers.Len() > 0 {
		t := s.flow.timers[0]
		if t.at > now.UnixNano() {
			return
		}
		heap.Pop(&s.flow.timers)
		if t.q.timerAt != t.at {
			continue // superseded by an earlier wake-up
		}
		t.q.timerAt = 0
		s.pump(t.q, now, -1, time.Time{}, starts)
		s.evictIfIdle(t.q, now)
	}
}

type timerItem struct {
	at int64
	q  *flowQueue
}

// timerHeap orders wake-ups by time.
type timerHeap []timerItem

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerItem)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h timerHeap) next() int64 {
	if len(h) == 0 {
		return 0
	}
	return h[0].at
}

package delivery

import (
	"container/heap"
	"context"
	"strings"
	"time"

	"github.com/google/btree"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// This file is the flow-control part of the dispatcher (flow-control.md, part A). A due
// delivery that has a flow-control key, or whose project has a concurrency ceiling, joins
// its key's waitlist; the head of a waitlist starts when flowctl admits it over every
// constraint (the key's parallelism and rate, the project ceiling, the engine's own cap).
// A blocked head waits for the release of a slot or for the time its rate allows; it is
// never found by scanning. Keys that compete for a shared limit (the ceiling, the engine
// cap) take turns, one start per turn. All of it runs under the dispatcher's lock.

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
}

// lessWait orders a waitlist: older runs first, then by message id (publication order).
func lessWait(a, b waitItem) bool {
	if a.orderAt != b.orderAt {
		return a.orderAt < b.orderAt
	}
	return a.id.less(b.id)
}

func newWaitItem(e storage.DueEntry, now time.Time) waitItem {
	return waitItem{orderAt: e.OrderAt, dueAt: e.DueAt, id: packID(e.MessageID), limits: e.Limits, since: now.UnixNano(), queue: e.Queue}
}

// entry rebuilds the due entry of a waiting delivery of q.
func (w waitItem) entry(q *flowQueue) storage.DueEntry {
	return storage.DueEntry{DueAt: w.dueAt, MessageID: w.id.String(), Project: q.id.project, Queue: w.queue,
		FlowKey: q.id.key, Limits: w.limits, OrderAt: w.orderAt}
}

// admission is what an attempt holds: the waitlist whose slots it took, and the start it
// must make durable before sending (rate-limited keys only).
type admission struct {
	flow       *flowQueue
	rateStart  int64
	ratePeriod time.Duration
	wokenAt    time.Time // the release that started it (zero: started otherwise)
}

const ringEngine = "engine"

func ringOfProject(p string) string { return "project:" + p }

// flowState is the dispatcher's flow-control state.
type flowState struct {
	queues   map[flowID]*flowQueue
	ceilings map[string]*flowctl.Ceiling
	inFlight map[string]int // per project, every delivery (for globalParallelism)
	rings    map[string][]*flowQueue
	timers   timerHeap
}

func newFlowState() flowState {
	return flowState{
		queues: map[flowID]*flowQueue{}, ceilings: map[string]*flowctl.Ceiling{},
		inFlight: map[string]int{}, rings: map[string][]*flowQueue{},
	}
}

func (d *dispatcher) ceiling(project string) *flowctl.Ceiling {
	c := d.flow.ceilings[project]
	if c == nil {
		c = &flowctl.Ceiling{Scope: project, Limit: d.e.cfg.ProjectCeiling}
		d.flow.ceilings[project] = c
	}
	return c
}

// needsFlow reports whether an entry goes through a waitlist.
func (d *dispatcher) needsFlow(e storage.DueEntry) bool {
	return !e.Timer && (e.FlowKey != "" || d.e.cfg.ProjectCeiling > 0)
}

func (d *dispatcher) queue(id flowID) *flowQueue {
	q := d.flow.queues[id]
	if q == nil {
		q = &flowQueue{id: id, key: flowctl.NewKey(id.key), waiting: btree.NewG(16, lessWait)}
		d.flow.queues[id] = q
	}
	return q
}

// enqueueFlow puts a due entry in its waitlist and tries to start the head.
func (d *dispatcher) enqueueFlow(ctx context.Context, e storage.DueEntry, now time.Time) {
	q := d.queue(flowID{e.Project, e.FlowKey})
	if e.FlowKey != "" {
		q.key.Ask(e.Limits)
	}
	q.waiting.ReplaceOrInsert(newWaitItem(e, now))
	d.pump(ctx, q, now, -1)
}

// constraints lists what a start from q must be admitted by.
func (d *dispatcher) constraints(q *flowQueue) []flowctl.Constraint {
	cs := make([]flowctl.Constraint, 0, 3)
	if q.id.key != "" {
		cs = append(cs, flowctl.Parallelism{K: q.key}, flowctl.Rate{K: q.key})
	}
	if c := d.ceiling(q.id.project); c.Limit > 0 {
		cs = append(cs, c)
	}
	return cs
}

// pump starts heads of q while they are admitted, at most limit of them (-1: no limit).
// A blocked head leaves q waiting for its blocker: a timer for a rate, a turn in the
// shared ring for the ceiling or the engine cap, or a release of the key's own slot.
func (d *dispatcher) pump(ctx context.Context, q *flowQueue, now time.Time, limit int) {
	d.pumpWoken(ctx, q, now, limit, time.Time{})
}

// pumpWoken is pump for starts caused by the release at wokenAt (for the Woken hook).
func (d *dispatcher) pumpWoken(ctx context.Context, q *flowQueue, now time.Time, limit int, wokenAt time.Time) {
	for started := 0; !d.stopping && q.waiting.Len() > 0 && (limit < 0 || started < limit); started++ {
		if head, _ := q.waiting.Min(); !d.stillDue(head.entry(q)) {
			// Cancelled or ended while it waited: it leaves without taking anything.
			q.waiting.DeleteMin()
			q.key.Unask(head.limits)
			started--
			continue
		}
		if d.inFlight >= d.e.cfg.MaxInFlight {
			d.block(q, "engine in-flight cap", now)
			d.joinRing(q, ringEngine)
			return
		}
		cs := d.constraints(q)
		dec := flowctl.Admit(now, cs...)
		if !dec.Admitted {
			d.block(q, dec.BlockedBy.String(), now)
			switch {
			case !dec.RetryAt.IsZero():
				d.wakeAt(q, dec.RetryAt)
			case dec.BlockedBy == flowctl.Constraint(d.ceiling(q.id.project)):
				d.joinRing(q, ringOfProject(q.id.project))
			}
			return // a key slot: the release of one pumps q again
		}
		head, _ := q.waiting.DeleteMin()
		q.blockedBy, q.blockedSince = "", time.Time{}
		adm := admission{flow: q, wokenAt: wokenAt}
		if e := q.key.Effective(); q.id.key != "" && e.Rate > 0 {
			adm.rateStart, adm.ratePeriod = now.UnixNano(), e.Period
		}
		d.start(ctx, head.entry(q), adm)
	}
	if q.waiting.Len() > 0 && limit >= 0 {
		// A turn taken from a ring: go to the back of it so other keys get theirs.
		ring := q.ringWanted(d)
		reason := "engine in-flight cap"
		if ring != ringEngine {
			reason = d.ceiling(q.id.project).String()
		}
		d.block(q, reason, now)
		d.joinRing(q, ring)
	}
}

// moveRateStart moves an admitted delivery's rate start to the time it is sent and
// returns that time.
func (d *dispatcher) moveRateStart(adm admission, at time.Time) int64 {
	d.lock()
	defer d.unlock()
	to := max(at.UnixNano(), adm.rateStart)
	adm.flow.key.Window.Move(adm.rateStart, to)
	return to
}

// stillDue reports whether a waiting delivery's message is still pending: a cancel, or
// the end of its run, removes it from storage but not from the waitlist.
func (d *dispatcher) stillDue(e storage.DueEntry) bool {
	ok := true
	_ = d.e.store.View(func(tx *storage.Tx) error {
		ok = tx.HasDue(e)
		return nil
	})
	return ok
}

// forgetWaiting removes a cancelled message from its waitlist at once, so the key's
// waitlist size is right even while the key cannot start anything.
func (d *dispatcher) forgetWaiting(e storage.DueEntry) {
	d.lock()
	defer d.unlock()
	q := d.flow.queues[flowID{e.Project, e.FlowKey}]
	if q == nil {
		return
	}
	if item, found := q.waiting.Delete(newWaitItem(e, time.Time{})); found {
		q.key.Unask(item.limits)
		d.evictIfIdle(q, d.e.now())
	}
}

// ringWanted is the ring q should wait in after a turn: the project's when it has a
// ceiling, else the engine's.
func (q *flowQueue) ringWanted(d *dispatcher) string {
	if d.ceiling(q.id.project).Limit > 0 {
		return ringOfProject(q.id.project)
	}
	return ringEngine
}

func (d *dispatcher) block(q *flowQueue, by string, now time.Time) {
	if q.blockedBy != by {
		q.blockedBy, q.blockedSince = by, now
	}
}

func (d *dispatcher) joinRing(q *flowQueue, ring string) {
	if q.ring != "" {
		return
	}
	q.ring = ring
	d.flow.rings[ring] = append(d.flow.rings[ring], q)
}

// pumpRing gives each queue waiting in ring one start, in turn, while there is room.
func (d *dispatcher) pumpRing(ctx context.Context, ring string, now time.Time, room func() bool) {
	for n := len(d.flow.rings[ring]); n > 0 && room(); n-- {
		q := d.flow.rings[ring][0]
		d.flow.rings[ring] = d.flow.rings[ring][1:]
		q.ring = ""
		d.pump(ctx, q, now, 1)
	}
	if len(d.flow.rings[ring]) == 0 {
		delete(d.flow.rings, ring)
	}
}

// releaseFlow returns an attempt's slots and lets the next deliveries start.
func (d *dispatcher) releaseFlow(ctx context.Context, e storage.DueEntry, adm admission, now time.Time) {
	if q := adm.flow; q != nil {
		flowctl.Release(d.constraints(q)...)
		if q.id.key != "" {
			q.key.Unask(e.Limits)
		}
		if c := d.ceiling(q.id.project); c.Limit > 0 {
			// The freed ceiling slot is shared: q takes its turn behind the keys that
			// were already waiting for one, so a busy key cannot starve the others.
			if q.waiting.Len() > 0 {
				d.block(q, c.String(), now)
				d.joinRing(q, ringOfProject(q.id.project))
			}
			d.pumpRing(ctx, ringOfProject(q.id.project), now, func() bool { return c.InFlight < c.Limit })
		} else {
			d.pumpWoken(ctx, q, now, -1, now)
		}
		d.evictIfIdle(q, now)
	}
	d.pumpRing(ctx, ringEngine, now, func() bool { return d.inFlight < d.e.cfg.MaxInFlight })
}

// evictIfIdle drops a waitlist that holds nothing, so memory follows the active keys.
func (d *dispatcher) evictIfIdle(q *flowQueue, now time.Time) {
	if q.waiting.Len() == 0 && q.ring == "" && q.timerAt == 0 && q.key.Idle(now) {
		delete(d.flow.queues, q.id)
	}
}

// wakeAt schedules q to be pumped at t.
func (d *dispatcher) wakeAt(q *flowQueue, t time.Time) {
	at := t.UnixNano()
	if q.timerAt != 0 && q.timerAt <= at {
		return
	}
	q.timerAt = at
	heap.Push(&d.flow.timers, timerItem{at: at, q: q})
}

// fireTimers pumps the queues whose wake-up time has come and says when the next is due
// (0: none).
func (d *dispatcher) fireTimers(ctx context.Context, now time.Time) int64 {
	for d.flow.timers.Len() > 0 {
		t := d.flow.timers[0]
		if t.at > now.UnixNano() {
			return t.at
		}
		heap.Pop(&d.flow.timers)
		if t.q.timerAt != t.at {
			continue // superseded by an earlier wake-up
		}
		t.q.timerAt = 0
		d.pump(ctx, t.q, now, -1)
		d.evictIfIdle(t.q, now)
	}
	return 0
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

// ---- reads and operator actions (callers hold the lock)

// FlowInfo is the state of one flow-control key (protocol §2.5 FlowControlInfo).
type FlowInfo struct {
	Key               string
	WaitListSize      int
	ParallelismMax    int
	ParallelismCount  int
	RateMax           int
	RateCount         int
	RatePeriod        time.Duration
	RatePeriodStart   time.Time
	Paused            bool
	PinnedParallelism bool
	PinnedRate        bool
}

func (q *flowQueue) info(now time.Time) FlowInfo {
	e := q.key.Effective()
	return FlowInfo{
		Key: q.id.key, WaitListSize: q.waiting.Len(),
		ParallelismMax: e.Parallelism, ParallelismCount: q.key.InFlight,
		RateMax: e.Rate, RateCount: q.key.Window.Count(now, e.Period), RatePeriod: e.Period,
		RatePeriodStart: q.key.Window.Oldest(now, e.Period),
		Paused:          q.key.Paused, PinnedParallelism: q.key.Pins.Parallelism > 0, PinnedRate: q.key.Pins.Rate > 0,
	}
}

func (d *dispatcher) flowInfos(project, search string, now time.Time) []FlowInfo {
	var out []FlowInfo
	for id, q := range d.flow.queues {
		if id.project == project && id.key != "" && strings.Contains(id.key, search) {
			out = append(out, q.info(now))
		}
	}
	return out
}

package delivery

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/google/btree"

	"github.com/duraton/duraton/storage"
)

// dispatcher holds the due entries that are next in line and hands them to attempts as
// they fall due, at most MaxInFlight at once and within each queue's parallelism.
//
// Memory is bounded: ready holds at most BufferSize entries. When it overflows, the
// entries with the latest keys are dropped from memory and `watermark` records the
// highest key still held; everything above it is in storage only and is paged in when
// ready runs dry. Invariant (under mu): every due entry in storage that is not in flight
// and not parked in a queue gate is in ready, or has a key above the watermark (when
// complete is false).
type dispatcher struct {
	e *Engine

	mu        chan struct{} // a 1-slot semaphore used as a mutex (lets run select on it with wake)
	ready     *btree.BTreeG[storage.DueEntry]
	complete  bool
	watermark []byte
	inFlight  int
	gates     map[gateKey]*queueGate
	carried   int64 // estimated bytes of messages carried in memory by held entries
	flow      flowState
	stopping  bool            // set by stop: releases no longer start waiting deliveries
	ctx       context.Context // the run context, for attempts started on a release

	wake    chan struct{} // 1-slot: something changed (new entry, freed slot)
	stopped chan struct{}
	done    chan struct{}
}

type gateKey struct{ project, queue string }

// queueGate enforces one queue's parallelism and pause. As in QStash, a queue message
// holds its slot from its first attempt until it is delivered or fails for good, retries
// included, so the next message waits for the current one. Entries that cannot start
// wait in parked, in the order they became due.
type queueGate struct {
	parallelism int
	paused      bool
	holders     map[string]bool // ids of messages holding a slot
	parked      []storage.DueEntry
}

func lessDue(a, b storage.DueEntry) bool {
	if a.DueAt != b.DueAt {
		return a.DueAt < b.DueAt
	}
	return a.MessageID < b.MessageID
}

func newDispatcher(e *Engine) *dispatcher {
	return &dispatcher{
		e:       e,
		mu:      make(chan struct{}, 1),
		ready:   btree.NewG(32, lessDue),
		gates:   map[gateKey]*queueGate{},
		flow:    newFlowState(),
		ctx:     context.Background(),
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func (d *dispatcher) lock()   { d.mu <- struct{}{} }
func (d *dispatcher) unlock() { <-d.mu }

func (d *dispatcher) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// load pages due entries from storage into ready, starting above the watermark. The
// caller holds the lock, or is Start (nothing runs yet).
func (d *dispatcher) load() error {
	limit := d.e.cfg.BufferSize - d.ready.Len()
	if limit <= 0 {
		return nil
	}
	n := 0
	var last []byte
	err := d.e.store.View(func(tx *storage.Tx) error {
		return tx.ScanDue(d.watermark, func(e storage.DueEntry) bool {
			if n == limit {
				return false
			}
			d.ready.ReplaceOrInsert(e)
			last = e.Key()
			n++
			return true
		})
	})
	if err != nil {
		return err
	}
	if n < limit {
		d.complete, d.watermark = true, nil
	} else {
		d.complete, d.watermark = false, last
	}
	return nil
}

// add makes newly committed due entries known. An entry above the watermark is left in
// storage: it is found when the buffer is paged in again.
func (d *dispatcher) add(entries ...storage.DueEntry) {
	if len(entries) == 0 {
		return
	}
	d.lock()
	for _, e := range entries {
		if !d.complete && bytes.Compare(e.Key(), d.watermark) > 0 {
			continue
		}
		if e.Msg != nil {
			if size := carriedSize(e.Msg); d.carried+size <= d.e.cfg.MaxCarriedBytes {
				d.carried += size
			} else {
				e.Msg = nil // over budget: the attempt reads it from storage
			}
		}
		d.ready.ReplaceOrInsert(e)
	}
	for d.ready.Len() > d.e.cfg.BufferSize {
		evicted, _ := d.ready.DeleteMax()
		d.uncarry(evicted)
		max, _ := d.ready.Max()
		d.complete, d.watermark = false, max.Key()
	}
	d.unlock()
	d.signal()
}

// stop makes run return; attempts already started go on.
func (d *dispatcher) stop() {
	d.lock()
	d.stopping = true
	d.unlock()
	close(d.stopped)
	<-d.done
}

// run is the dispatch loop: it starts every entry that is due while slots are free, then
// sleeps until the next entry is due or something changes.
func (d *dispatcher) run(ctx context.Context) {
	defer close(d.done)
	d.lock()
	d.ctx = ctx
	d.unlock()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait, err := d.dispatchDue(ctx)
		if err != nil {
			d.e.log.Error("page in due index", "err", err)
			wait = time.Second
		}
		timer.Reset(wait)
		select {
		case <-d.stopped:
			return
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// idleWait is how long run sleeps when nothing is scheduled; a new entry wakes it earlier.
const idleWait = time.Minute

// dispatchDue starts due entries until none is due or no slot is free, and says how long
// to sleep before looking again.
func (d *dispatcher) dispatchDue(ctx context.Context) (time.Duration, error) {
	d.lock()
	defer d.unlock()
	now := d.e.now()
	d.fireTimers(ctx, now)
	// wait caps a sleep at the next flow-control wake-up, read when the loop ends: this
	// pass may have scheduled new ones.
	wait := func(w time.Duration) time.Duration {
		if len(d.flow.timers) > 0 {
			w = min(w, time.Duration(d.flow.timers[0].at-now.UnixNano()))
		}
		return max(w, 0)
	}
	for {
		if d.inFlight >= d.e.cfg.MaxInFlight {
			return wait(idleWait), nil // a finishing attempt signals wake
		}
		if d.ready.Len() == 0 && !d.complete {
			if err := d.load(); err != nil {
				return 0, err
			}
		}
		next, ok := d.ready.Min()
		if !ok {
			return wait(idleWait), nil
		}
		if next.DueAt > now.UnixNano() {
			return wait(time.Duration(next.DueAt - now.UnixNano())), nil
		}
		d.ready.DeleteMin()
		if next.Queue != "" && !d.admitQueue(next) {
			continue
		}
		d.uncarry(next)
		if d.needsFlow(next) {
			next.Msg = nil // a waiting delivery holds no body: memory stays per entry, not per byte
			d.enqueueFlow(ctx, next, now)
			continue
		}
		d.start(ctx, next, admission{})
	}
}

// start launches an attempt. Caller holds the lock.
func (d *dispatcher) start(ctx context.Context, e storage.DueEntry, adm admission) {
	d.inFlight++
	d.flow.inFlight[e.Project]++
	d.e.attempts.Add(1)
	go d.e.attempt(ctx, e, adm)
}

// carriedSize estimates the memory a carried message holds.
func carriedSize(m *storage.Message) int64 { return int64(len(m.Body)) + 512 }

// uncarry releases the budget of an entry leaving the dispatcher. Caller holds the lock.
func (d *dispatcher) uncarry(e storage.DueEntry) {
	if e.Msg != nil {
		d.carried -= carriedSize(e.Msg)
	}
}

// admitQueue takes a slot of the entry's queue, or parks the entry. Caller holds the lock.
func (d *dispatcher) admitQueue(entry storage.DueEntry) bool {
	g := d.gate(entry.Project, entry.Queue)
	if g == nil {
		return true // the queue was deleted: its messages go out without a limit
	}
	if g.holders[entry.MessageID] {
		return true // a retry of the message that holds the slot
	}
	if g.paused || (g.parallelism > 0 && len(g.holders) >= g.parallelism) {
		g.parked = append(g.parked, entry)
		return false
	}
	g.holders[entry.MessageID] = true
	return true
}

// gate returns the queue's gate, loading its configuration on first use. Caller holds the lock.
func (d *dispatcher) gate(project, queue string) *queueGate {
	k := gateKey{project, queue}
	if g, ok := d.gates[k]; ok {
		return g
	}
	var q *storage.Queue
	err := d.e.store.View(func(tx *storage.Tx) error {
		var err error
		q, err = tx.Queue(project, queue)
		return err
	})
	if err != nil {
		return nil
	}
	g := &queueGate{parallelism: q.Parallelism, paused: q.Paused, holders: map[string]bool{}}
	d.gates[k] = g
	return g
}

// release frees the slots an attempt held and makes follow-up entries known. A queue
// message that will be retried (its id is among follow) keeps its queue slot.
func (d *dispatcher) release(entry storage.DueEntry, adm admission, follow []storage.DueEntry) {
	d.lock()
	d.inFlight--
	d.flow.inFlight[entry.Project]--
	if entry.Queue != "" && !slices.ContainsFunc(follow, func(f storage.DueEntry) bool { return f.MessageID == entry.MessageID }) {
		d.releaseQueueSlotLocked(entry.Project, entry.Queue, entry.MessageID)
	}
	d.releaseFlow(d.ctx, entry, adm, d.e.now())
	d.unlock()
	d.add(follow...)
	d.signal()
}

// forget frees the queue slot of a message that ended outside an attempt (cancelled).
func (d *dispatcher) forget(project, queue, messageID string) {
	d.lock()
	d.releaseQueueSlotLocked(project, queue, messageID)
	d.unlock()
	d.signal()
}

func (d *dispatcher) releaseQueueSlotLocked(project, queue, messageID string) {
	if g := d.gates[gateKey{project, queue}]; g != nil && g.holders[messageID] {
		delete(g.holders, messageID)
		d.unparkLocked(g)
	}
}

// unparkLocked moves as many parked entries back to ready as the gate has free slots.
func (d *dispatcher) unparkLocked(g *queueGate) {
	free := len(g.parked)
	if g.paused {
		free = 0
	} else if g.parallelism > 0 {
		free = max(0, min(free, g.parallelism-len(g.holders)))
	}
	for i := 0; i < free; i++ {
		d.ready.ReplaceOrInsert(g.parked[i])
	}
	g.parked = g.parked[free:]
}

// configureQueue applies a queue's new settings (nil: deleted) and releases what it can.
func (d *dispatcher) configureQueue(project, name string, q *storage.Queue) {
	d.lock()
	k := gateKey{project, name}
	g := d.gates[k]
	switch {
	case q == nil && g != nil:
		g.paused, g.parallelism = false, 0
		d.unparkLocked(g)
		delete(d.gates, k)
	case q != nil && g != nil:
		g.paused, g.parallelism = q.Paused, q.Parallelism
		d.unparkLocked(g)
	}
	d.unlock()
	d.signal()
}

// queueLag is the number of a queue's messages parked or in flight.
func (d *dispatcher) queueLag(project, name string) int {
	d.lock()
	defer d.unlock()
	if g := d.gates[gateKey{project, name}]; g != nil {
		return len(g.parked) + len(g.holders)
	}
	return 0
}

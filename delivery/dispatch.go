package delivery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/duraton/duraton/delivery/internal/sched"
	"github.com/duraton/duraton/storage"
)

// dispatcher is the thin loop around the pure scheduler: it serialises calls into it,
// reads pages of the due index outside its lock, launches the starts it decides on and
// sleeps until its next wake-up or until something changes. It knows nothing of the
// engine: what it needs is passed in as functions.
//
// A change made through with (an attempt finishing, a publish) also starts what is due
// at once, on the caller's goroutine, and wakes the loop only when the loop has
// something to do that the caller cannot: a page to read, or a wake-up earlier than the
// one it sleeps until. At low load the loop then sleeps through a workflow's steps;
// waking it on every change cost a thread wake-up per step on an idle CPU.
type dispatcher struct {
	mu         sync.Mutex // guards sched, sleepUntil and stopping; never held across storage or network I/O
	sched      *sched.Scheduler
	sleepUntil int64 // unix ns the loop sleeps until (0: idleWait, nothing scheduled)
	stopping   bool  // stop was called: changes no longer ask the scheduler for what is due

	page   func(req sched.PageRequest) ([]storage.DueEntry, error)
	launch func(sched.Start) // runs one attempt on an attempt worker, without waiting
	now    func() time.Time
	log    *slog.Logger

	wake    chan struct{} // 1-slot: something changed (new entry, freed slot)
	stopped chan struct{}
	done    chan struct{}
}

// idleWait is how long run sleeps when nothing is scheduled; a change wakes it earlier.
const idleWait = time.Minute

// pageRetryWait is how long run waits after a failed read of the due index.
const pageRetryWait = time.Second

func newDispatcher(s *sched.Scheduler, page func(sched.PageRequest) ([]storage.DueEntry, error),
	launch func(sched.Start), now func() time.Time, log *slog.Logger) *dispatcher {
	return &dispatcher{
		sched: s, page: page, launch: launch, now: now, log: log,
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), done: make(chan struct{}),
	}
}

func (d *dispatcher) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// with runs fn under the lock and launches the starts it returns, and whatever else is
// due now.
func (d *dispatcher) with(fn func(s *sched.Scheduler) []sched.Start) {
	for _, st := range d.decide(fn) {
		d.launch(st)
	}
}

// withKeep is with, except that the first start (if any) is returned for the caller to
// run itself instead of being launched: an attempt worker goes on with its run's next
// step without a hand-off to another worker.
func (d *dispatcher) withKeep(fn func(s *sched.Scheduler) []sched.Start) (kept sched.Start, ok bool) {
	starts := d.decide(fn)
	if len(starts) == 0 {
		return sched.Start{}, false
	}
	for _, st := range starts[1:] {
		d.launch(st)
	}
	return starts[0], true
}

// decide runs fn under the lock, adds what is due now (sched.NextReady) to the starts
// fn returns, and signals the loop if it must read a page or wake up earlier.
func (d *dispatcher) decide(fn func(s *sched.Scheduler) []sched.Start) []sched.Start {
	d.mu.Lock()
	starts := fn(d.sched)
	if d.stopping {
		d.mu.Unlock()
		return starts
	}
	dec, wantsPage := d.sched.NextReady(d.now())
	wake := wantsPage || dec.WakeAt != 0 && (d.sleepUntil == 0 || dec.WakeAt < d.sleepUntil)
	d.mu.Unlock()
	if wake {
		d.signal()
	}
	if len(starts) == 0 {
		return dec.Starts
	}
	return append(starts, dec.Starts...)
}

// locked runs fn under the lock (reads and small changes that start nothing).
func (d *dispatcher) locked(fn func(s *sched.Scheduler)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn(d.sched)
}

// apply hands a transaction's effects to the scheduler.
func (d *dispatcher) apply(fx effects) {
	if len(fx.add) == 0 && len(fx.forget) == 0 && len(fx.tokens) == 0 {
		return
	}
	d.with(func(s *sched.Scheduler) []sched.Start {
		now := d.now()
		starts := applyTokens(s, fx.tokens, now) // ai.go
		for _, e := range fx.forget {
			s.Forget(e, now)
		}
		s.Add(fx.add...)
		return starts
	})
}

// finish, retry and drop report a started delivery back (sched.Finish, Retry, Drop).
func (d *dispatcher) finish(st sched.Start, follow []storage.DueEntry) {
	d.with(func(s *sched.Scheduler) []sched.Start { return s.Finish(st, follow, d.now()) })
}

// finishKeep is finish, returning the first start it makes for the caller to run
// (withKeep).
func (d *dispatcher) finishKeep(st sched.Start, follow []storage.DueEntry) (sched.Start, bool) {
	return d.withKeep(func(s *sched.Scheduler) []sched.Start { return s.Finish(st, follow, d.now()) })
}

func (d *dispatcher) retry(st sched.Start, after time.Duration, sent bool) {
	d.with(func(s *sched.Scheduler) []sched.Start {
		now := d.now()
		return s.Retry(st, now.Add(after), sent, now)
	})
}

func (d *dispatcher) drop(st sched.Start) {
	d.with(func(s *sched.Scheduler) []sched.Start { return s.Drop(st, d.now()) })
}

// stop makes run return and the scheduler start nothing more; attempts already started
// go on.
func (d *dispatcher) stop() {
	d.mu.Lock()
	d.sched.Stop()
	d.stopping = true
	d.mu.Unlock()
	close(d.stopped)
	<-d.done
}

// run is the dispatch loop.
func (d *dispatcher) run(ctx context.Context) {
	defer close(d.done)
	timer := time.NewTimer(idleWait)
	defer timer.Stop()
	for {
		wait := d.pass()
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

// pass asks the scheduler for what is due, launches it, reads a page of the due index
// when the scheduler asks for one, and says how long to sleep.
func (d *dispatcher) pass() time.Duration {
	for {
		d.mu.Lock()
		now := d.now()
		dec := d.sched.Next(now)
		if dec.Page == nil {
			// Set with the decision, under the lock: a change after it that needs an
			// earlier wake-up sees this and signals.
			d.sleepUntil = dec.WakeAt
		}
		d.mu.Unlock()
		for _, st := range dec.Starts {
			d.launch(st)
		}
		if dec.Page == nil {
			if dec.WakeAt == 0 {
				return idleWait
			}
			return max(0, time.Duration(dec.WakeAt-now.UnixNano()))
		}
		entries, err := d.page(*dec.Page)
		d.mu.Lock()
		if err != nil {
			d.sched.PageFailed()
		} else {
			err = d.sched.Paged(*dec.Page, entries, len(entries) >= dec.Page.Limit)
		}
		if err != nil {
			d.sleepUntil = d.now().Add(pageRetryWait).UnixNano()
		}
		d.mu.Unlock()
		if err != nil {
			d.log.Error("page in due index", "err", err)
			return pageRetryWait
		}
	}
}

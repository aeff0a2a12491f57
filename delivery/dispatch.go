package delivery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/duraton/duraton/delivery/sched"
	"github.com/duraton/duraton/storage"
)

// dispatcher is the thin loop around the pure scheduler: it serialises calls into it,
// reads pages of the due index outside its lock, launches the starts it decides on and
// sleeps until its next wake-up or until something changes. It knows nothing of the
// engine: what it needs is passed in as functions.
type dispatcher struct {
	mu    sync.Mutex // guards sched; never held across storage or network I/O
	sched *sched.Scheduler

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

// with runs fn under the lock and launches the starts it returns.
func (d *dispatcher) with(fn func(s *sched.Scheduler) []sched.Start) {
	d.mu.Lock()
	starts := fn(d.sched)
	d.mu.Unlock()
	for _, st := range starts {
		d.launch(st)
	}
	d.signal()
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
		starts := applyTokens(s, fx.tokens, now) // ai_tokens.go
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
		d.mu.Unlock()
		if err != nil {
			d.log.Error("page in due index", "err", err)
			return pageRetryWait
		}
	}
}

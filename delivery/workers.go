package delivery

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/delivery/internal/sched"
)

// idleWorkerWait is how long an attempt worker waits for the next start before it ends.
const idleWorkerWait = 5 * time.Second

// workers runs attempts on goroutines that stay for the next one. An attempt may also
// return the next start for its worker to run (the run's next step), with no hand-off.
//
// Why not a goroutine per attempt: an attempt goes deep (net/http, bbolt, signing), so a
// fresh goroutine grew and copied its stack several times on every delivery — about 3 %
// of the server's CPU per workflow step in `bench workflow --endpoint=external`. A worker
// keeps its grown stack: after an attempt it takes the next start if one is handed over
// within idleWorkerWait, and ends otherwise or when stop is called. There are never more
// workers than attempts that overlapped (the scheduler's MaxInFlight bounds those).
type workers struct {
	run  func(sched.Start) (next sched.Start, ok bool)
	idle time.Duration
	work chan sched.Start // unbuffered: a send succeeds only into a waiting worker
	quit chan struct{}
	wg   sync.WaitGroup

	spawned atomic.Int64 // workers started so far (tests read it)
}

func newWorkers(run func(sched.Start) (sched.Start, bool), idle time.Duration) *workers {
	return &workers{run: run, idle: idle, work: make(chan sched.Start), quit: make(chan struct{})}
}

// start runs st on a waiting worker, or on a new one when none is waiting.
func (w *workers) start(st sched.Start) {
	select {
	case w.work <- st:
		return
	default:
	}
	w.wg.Add(1)
	w.spawned.Add(1)
	go w.loop(st)
}

// loop runs st, then each start it returns or that is handed over while it waits.
func (w *workers) loop(st sched.Start) {
	defer w.wg.Done()
	timer := time.NewTimer(w.idle)
	defer timer.Stop()
	for {
		next, ok := w.run(st)
		if ok {
			st = next
			continue
		}
		timer.Reset(w.idle) // Go ≥ 1.23: a tick from during the run does not survive a Reset
		select {
		case st = <-w.work:
		case <-timer.C:
			return
		case <-w.quit:
			return
		}
	}
}

// stop ends the waiting workers and waits for every worker to end. Starts must have
// stopped: the caller waits for the attempts first.
func (w *workers) stop() {
	close(w.quit)
	w.wg.Wait()
}

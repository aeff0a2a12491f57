package delivery

import (
	"time"

	"github.com/duraton/duraton/delivery/internal/sched"
)

// Observer is told what the engine does, for metrics (server/metrics implements it with
// Prometheus collectors). The engine calls it after the fact, outside its transactions
// (a transaction function may run twice; a count must not), with labels from small fixed
// sets only: never a key, a URL or an id. Methods must be fast and safe for concurrent
// use. Gauges (in flight, waiting) are read from Engine.Stats instead.
type Observer interface {
	// Published counts n messages stored by a publish, by kind: ObsMessage or
	// ObsWorkflow. Deduplicated ones are counted by Deduplicated instead.
	Published(kind string, n int)
	Deduplicated(n int)
	// Attempt is one HTTP attempt's answer and how long it took; verdict is
	// ObsDelivered, ObsRetryable or ObsFinal.
	Attempt(verdict string, took time.Duration)
	// Recorded is the state an attempt's outcome moved its message to: StateDelivered,
	// StateError (a retry is scheduled) or StateFailed.
	Recorded(state string)
	// RunStarted counts a workflow run created; RunEnded one that reached a final state
	// (RunSuccess, RunFailed, RunCanceled).
	RunStarted()
	RunEnded(state string)
}

// Observer label values.
const (
	ObsMessage   = "message"
	ObsWorkflow  = "workflow"
	ObsDelivered = "delivered"
	ObsRetryable = "retryable"
	ObsFinal     = "final"
)

// nopObserver is the default: metrics off.
type nopObserver struct{}

func (nopObserver) Published(string, int)         {}
func (nopObserver) Deduplicated(int)              {}
func (nopObserver) Attempt(string, time.Duration) {}
func (nopObserver) Recorded(string)               {}
func (nopObserver) RunStarted()                   {}
func (nopObserver) RunEnded(string)               {}

// Stats is a snapshot of the engine's load: deliveries in flight, and deliveries in
// flow-control waitlists by what their key's head waits for (reasons: WaitReasons).
type Stats = sched.Stats

// WaitReasons are the reason classes of Stats.
var WaitReasons = sched.WaitReasons

// Stats reads the scheduler's counters (for a metrics scrape: it walks the waitlists).
func (e *Engine) Stats() Stats {
	var st Stats
	e.disp.locked(func(s *sched.Scheduler) { st = s.Stats() })
	return st
}

func verdictLabel(v Verdict) string {
	switch v {
	case Delivered:
		return ObsDelivered
	case Retryable:
		return ObsRetryable
	}
	return ObsFinal
}

// observePublished counts a publication's stored messages and runs after its commit.
func (e *Engine) observePublished(pubs []Publication, results []PublishResult) {
	var plain, workflow, dedup, runs int
	for i, p := range pubs {
		switch {
		case results[i].Deduplicated:
			dedup++
		case p.Message.RunID != "":
			workflow++
			if p.Init != nil {
				runs++
			}
		default:
			plain++
		}
	}
	o := e.cfg.Observer
	if plain > 0 {
		o.Published(ObsMessage, plain)
	}
	if workflow > 0 {
		o.Published(ObsWorkflow, workflow)
	}
	if dedup > 0 {
		o.Deduplicated(dedup)
	}
	for range runs {
		o.RunStarted()
	}
}

// observeRecorded counts an attempt's recorded outcome, and the run it ended, after the
// commit.
func (e *Engine) observeRecorded(state string, fx effects) {
	e.cfg.Observer.Recorded(state)
	e.observeRunsEnded(fx)
}

// observeRunsEnded counts the runs a committed transaction ended.
func (e *Engine) observeRunsEnded(fx effects) {
	for _, state := range fx.ended {
		e.cfg.Observer.RunEnded(state)
	}
}

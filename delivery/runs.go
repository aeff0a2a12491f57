package delivery

import (
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/storage"
)

// runHooks is the seam between the message engine and workflow runs. The message engine
// (publish.go, outcome.go, attempt.go) calls it inside its own transactions and knows
// nothing else of runs; *runs (workflow*.go, waiters.go) implements it. Native workflows
// and AI steps are further units behind this seam.
type runHooks interface {
	// attach binds a published message to its run: it creates the run for an init
	// message, or appends the step to a live run's history, and gives the message the
	// run's configuration. It returns false when the message must not be stored (a
	// duplicate trigger or an already recorded step).
	attach(tx *storage.Tx, m *Message, init *RunInit, now time.Time) (bool, error)
	// settled is told that one of a run's messages ended (delivered or failed).
	settled(tx *storage.Tx, m *Message, state string) error
	// failed is told that a delivery to the run's workflow URL failed for good: the run
	// fails, its pending work is dropped and an invoking parent is resumed.
	failed(tx *storage.Tx, m *Message, out Outcome, dlqID string, now time.Time) (effects, error)
	// bindCallback binds a callback created after an attempt of a run's message to the
	// run (history entry, headers, configuration; the workflow fields of a failure
	// callback). It returns false when the run has ended and the callback is not sent.
	bindCallback(tx *storage.Tx, cb, src *Message, out Outcome, dlqID string, now time.Time) (bool, error)
}

// runs is the workflow-run unit: run creation and history, steps, waits and notifies,
// run ends and parent resumption. Its methods run inside transactions given to them;
// it holds only its limits, an id generator and the clock that orders runs.
type runs struct {
	limits runLimits
	ids    *storage.IDGen
	order  orderClock
}

// orderClock hands out run creation times in unix ns that never repeat, so runs created
// in one millisecond (or one transaction) keep their creation order in waitlists.
type orderClock struct{ last atomic.Int64 }

func (c *orderClock) next(now time.Time) int64 {
	for {
		last := c.last.Load()
		n := max(now.UnixNano(), last+1)
		if c.last.CompareAndSwap(last, n) {
			return n
		}
	}
}

// runLimits are the workflow limits of Config.
type runLimits struct {
	MaxRunSteps        int
	MaxRunHistoryBytes int64
	MaxParallelSteps   int
	MaxInvokeDepth     int
	MaxWaitTimeout     time.Duration
}

var _ runHooks = (*runs)(nil)

// newLog is the CREATED log event of a message made inside a transaction.
func (w *runs) newLog(m *Message, now time.Time) *storage.LogEvent {
	return stampLog(w.ids, now, storage.LogEvent{State: storage.StateCreated,
		MessageID: m.ID, URL: m.URL, Queue: m.Queue, Labels: m.Labels, NextDeliveryTime: m.DueAt / int64(time.Millisecond)})
}

// attach implements runHooks.
func (w *runs) attach(tx *storage.Tx, m *Message, init *RunInit, now time.Time) (bool, error) {
	var err error
	created := true
	if init != nil {
		created, err = w.createRunTx(tx, m, init, now)
	} else {
		err = w.continueRunTx(tx, m, now)
	}
	if err == errDuplicateStep {
		return false, nil
	}
	return created && err == nil, err
}

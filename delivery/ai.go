package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/duraton/duraton/delivery/internal/aimeter"
	"github.com/duraton/duraton/delivery/internal/sched"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// AI steps (docs/protocol.md, "AI steps and spend controls"): a workflow call Duraton
// executes against an OpenAI- or Anthropic-compatible API is metered (its usage recorded
// on the step and the run) and capped (the run's cap is checked before the call leaves).
// The metering, the cap and the tokenThrottle buckets are delivery/internal/aimeter's;
// here the engine reads and writes them in its transactions and tells its scheduler.

// StatusBudgetExceeded is the status of the synthetic failure a budget-stopped AI step
// reports to the run's failure function (402 Payment Required).
const StatusBudgetExceeded = aimeter.StatusBudgetExceeded

// BudgetFailureBody is the JSON body of a budget failure (status 402), as the failure
// function receives it (aimeter.FailureBody).
type BudgetFailureBody = aimeter.FailureBody

// budgetStop marks an outcome made up by the cap check: the call never left.
type budgetStop struct {
	// failure is the run's failure callback, called as for any failed run.
	failure *storage.CallbackSpec
}

// AIPrices is the price table in force (nil: none).
func (e *Engine) AIPrices() *flowctl.AIPrices { return e.cfg.AIPrices }

// markAICall is applied when a call step is recorded: an AI call is flagged (metered
// and capped). Its credential headers are hidden like any call's (redact.go).
func markAICall(m *Message) {
	if aimeter.IsCall(m) {
		m.AICall = true
	}
}

// capOutcome checks the run's cap before an AI call leaves. It returns the synthetic
// final outcome of a call the cap does not let start, nil when it may start.
func (e *Engine) capOutcome(m *Message) (*Outcome, error) {
	var run *Run
	err := e.store.View(func(tx *storage.Tx) error {
		var err error
		run, err = tx.Run(m.Project, m.RunID)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil // the run is gone: the attempt's record finds out
	}
	if err != nil {
		return nil, err
	}
	resp, code, stopped := aimeter.Stop(run, m, e.cfg.AIPrices)
	if !stopped {
		return nil, nil
	}
	e.log.Info("ai step stopped by the run's cap", "project", m.Project, "run_id", m.RunID, "message_id", m.ID, "code", code)
	return &Outcome{
		Verdict: Final, Fault: FaultBudget, Response: resp,
		budget: &budgetStop{failure: run.FailureCallback},
	}, nil
}

// meterAI records the metered usage of an AI call's delivered answer on out.
func (e *Engine) meterAI(m *Message, out *Outcome) {
	if out.Verdict != Delivered {
		return
	}
	if u := aimeter.Meter(m, out.Response.Body, e.cfg.AIPrices); u != nil {
		out.AI = u
	}
}

// bookTokens makes a start's tokenThrottle reservation durable (aimeter.BookTx).
func (e *Engine) bookTokens(ctx context.Context, m *Message, key string, reserve int64) error {
	now := e.now()
	_, err := update(ctx, e.store, func(tx *storage.Tx) (struct{}, error) {
		return struct{}{}, aimeter.BookTx(tx, m.Project, m.RunID, key, reserve, now)
	})
	return err
}

// applyTokens applies bucket changes to the scheduler; a credit may start waiting runs.
func applyTokens(s *sched.Scheduler, adjs []aimeter.Adj, now time.Time) []sched.Start {
	var starts []sched.Start
	for _, a := range adjs {
		s.AdjustTokens(a.Project, a.Key, a.Shift, a.Avg, now, &starts)
	}
	return starts
}

package delivery

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/delivery/internal/aimeter"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// Failure-function states of a run (FailureFunctionLog.state).
const (
	callbackInProgress = "CALLBACK_INPROGRESS"
	callbackSuccess    = "CALLBACK_SUCCESS"
	callbackFail       = "CALLBACK_FAIL"
)

// nonWorkflowDestination is the error of a run whose first delivery was answered by
// something that is not a workflow endpoint (feature WF_DetectTrigger).
const nonWorkflowDestination = "detected a non-workflow destination for trigger/invoke. make sure you are sending the request to the correct endpoint"

// notAdoptedBySDK is the error of a run triggered without an SDK whose first delivery was
// answered with success but not adopted: the endpoint's SDK predates the protocol's
// re-trigger (or it is no workflow endpoint), so the run could never go on.
const notAdoptedBySDK = "trigger rest api is only usable with sdk versions after v1.0.0 major version"

// awaitsSDK reports whether m's run, triggered without an SDK, still waits for its SDK to
// adopt it. The SDK adopts the run (a committed publish) before it answers the delivery,
// so a read after the answer sees it.
func (e *Engine) awaitsSDK(m *Message) (bool, error) {
	var waits bool
	err := e.store.View(func(tx *storage.Tx) error {
		run, err := tx.Run(m.Project, m.RunID)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		waits = run.Live() && run.AwaitingSDK
		return nil
	})
	return waits, err
}

// prepare fills the fields Publish assigns to a new message.
func prepare(m *Message, id string, now time.Time) {
	m.ID = id
	if m.Kind == "" {
		m.Kind = storage.KindMessage
	}
	m.CreatedAt = now.UnixMilli()
	m.State = storage.StateCreated
	due := now
	if m.NotBefore > now.UnixMilli() {
		due = time.UnixMilli(m.NotBefore)
	} else {
		m.NotBefore = now.UnixMilli()
	}
	m.DueAt = due.UnixNano()
}

// publishStepTx publishes a step into a live run from inside the engine: a resumption
// after notify, a wait timeout or an invoked child's end. template is the publish-style
// message the SDK asked for (its headers, parsed; only read); body is the step object.
// It returns the new message's due entry (nil when the step was already recorded).
func (w *runs) publishStepTx(tx *storage.Tx, template *Message, body []byte, now time.Time) (*storage.DueEntry, error) {
	m := *template
	m.Body = body
	m.CallType = CallStep
	prepare(&m, w.ids.New(storage.PrefixMessage, now), now)
	if err := w.continueRunTx(tx, &m, now); errors.Is(err, errDuplicateStep) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if err := putNew(tx, &m, w.newLog(&m, now)); err != nil {
		return nil, err
	}
	d := storage.DueWith(&m)
	return &d, nil
}

// endRunTx moves a live run to a final state, drops its pending messages (but keep) and
// waiters unless it succeeded, and resumes an invoking parent. run is a copy the caller
// read in this transaction.
func (w *runs) endRunTx(tx *storage.Tx, project string, run *Run, state string, keep string, now time.Time) (effects, error) {
	fx := effects{ended: []string{state}}
	run.State, run.EndedAt = state, now.UnixMilli()
	if adj, err := aimeter.EndTx(tx, project, run, now); err != nil {
		return fx, err
	} else if adj != nil {
		fx.tokens = append(fx.tokens, *adj)
	}
	// A cancelled or failed run's pending work is dropped. A successful run's is not: the
	// delivery that completed it is still in flight, and its outcome is still recorded.
	if state != RunSuccess {
		dropped, err := w.dropRunMessagesTx(tx, project, run.ID, keep)
		if err != nil {
			return fx, err
		}
		fx.forget = dropped
	}
	if err := tx.DeleteCancelEntries(project, run.CancelKeys); err != nil {
		return fx, err
	}
	run.CancelKeys = nil
	// Events kept for a later wait go with the run; a failed run keeps them for a resume
	// from the DLQ (the retention sweep and run deletion still remove them).
	if state != RunFailed {
		if err := tx.DeleteRunEvents(project, run.ID); err != nil {
			return fx, err
		}
	}
	if err := tx.PutRun(project, run); err != nil {
		return fx, err
	}
	if run.Parent == nil {
		return fx, nil
	}
	out := map[string]any{"isFailed": state == RunFailed, "isCanceled": state == RunCanceled}
	if state == RunSuccess && run.HasResp {
		out["body"] = string(run.Response)
	}
	step, err := stepWith(run.Parent.Step, map[string]any{"out": string(wire.MustCompactJSON(out))})
	if err != nil {
		return fx, err
	}
	due, err := w.publishStepTx(tx, run.Parent.Template, step, now)
	if errors.Is(err, ErrRunEnded) {
		// The parent ended meanwhile (a parallel branch failed it): nobody to resume, but
		// its logs show what the invoke returned, as QStash's do.
		return fx, w.recordEndedStepTx(tx, run.Parent.Template, step, now)
	}
	if errors.Is(err, storage.ErrNotFound) {
		return fx, nil // the parent is gone: nobody to resume
	}
	if due != nil {
		fx.add = append(fx.add, *due)
	}
	return fx, err
}

// recordEndedStepTx records a step in the history of a run that has ended, without a
// delivery: the result of a child the run invoked, which ended after it.
func (w *runs) recordEndedStepTx(tx *storage.Tx, template *Message, step []byte, now time.Time) error {
	run, err := tx.Run(template.Project, template.RunID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	entry := &HistoryEntry{MessageID: w.ids.New(storage.PrefixMessage, now), Body: step, CallType: CallStep, CreatedAt: now.UnixMilli()}
	if key := stepKey(step); key != "" {
		if _, dup := tx.StepMessage(template.Project, run.ID, key); dup {
			return nil
		}
		if err := tx.PutStepKey(template.Project, run.ID, key, entry.MessageID); err != nil {
			return err
		}
	}
	if err := w.appendHistoryTx(tx, template.Project, run, entry); err != nil {
		if errors.Is(err, ErrRunLimit) {
			return nil // a full history keeps what it has: the run has ended anyway
		}
		return err
	}
	return tx.PutRunCursor(template.Project, run)
}

// dropRunMessagesTx removes a run's pending messages (except keep) with their due entries,
// and the waiters their timers guard. It returns the due entries it removed.
func (w *runs) dropRunMessagesTx(tx *storage.Tx, project, runID, keep string) ([]storage.DueEntry, error) {
	ids, err := tx.RunMessages(project, runID)
	if err != nil {
		return nil, err
	}
	var dropped []storage.DueEntry
	for _, id := range ids {
		if id == keep {
			continue
		}
		m, err := tx.Message(project, id)
		switch {
		case err == nil:
			due := storage.DueOf(m)
			if err := tx.DeleteDue(due); err != nil {
				return nil, err
			}
			if err := tx.DeleteMessage(project, id); err != nil {
				return nil, err
			}
			if m.Kind == storage.KindWaitTimeout {
				if err := tx.DeleteWaiter(project, m.EventID, runID); err != nil {
					return nil, err
				}
			}
			dropped = append(dropped, due)
		case !errors.Is(err, storage.ErrNotFound):
			return nil, err
		}
		if err := tx.UnlinkRunMessage(project, runID, id); err != nil {
			return nil, err
		}
	}
	return dropped, nil
}

// CompleteRun marks a run successful with the route function's return value (body; hasBody
// false when it returned undefined) and resumes an invoking parent. Completing an ended
// run changes nothing.
//
// The run's sole delivery in flight, which asked for the end, has its outcome written in
// the same transaction (early.go).
func (e *Engine) CompleteRun(ctx context.Context, project, runID string, body []byte, hasBody bool) error {
	ea := e.earlyOutcome(project, runID, e.now())
	_, err := e.finishRun(ctx, project, runID, ea, func(run *Run) string {
		run.Response, run.HasResp = body, hasBody
		return RunSuccess
	})
	return err
}

// CancelRun cancels a live run: its pending messages and waiters are dropped and an
// invoking parent is resumed with isCanceled. It returns whether the run was live.
func (e *Engine) CancelRun(ctx context.Context, project, runID string) (bool, error) {
	return e.finishRun(ctx, project, runID, nil, func(*Run) string { return RunCanceled })
}

// finishRun ends a live run in the state end gives it, with the early outcome ea (nil:
// none); it reports whether the run was live.
func (e *Engine) finishRun(ctx context.Context, project, runID string, ea *early, end func(*Run) string) (bool, error) {
	type result struct {
		live  bool
		fx    effects
		early []writtenEarly
	}
	now := e.now()
	var eas []*early
	if ea != nil {
		eas = []*early{ea}
	}
	res, err := update(ctx, e.store, func(tx *storage.Tx) (result, error) {
		run, err := tx.Run(project, runID)
		if errors.Is(err, storage.ErrNotFound) {
			return result{}, fmt.Errorf("%w: %q", ErrRunNotFound, runID)
		}
		if err != nil || !run.Live() {
			return result{}, err
		}
		fx, err := e.wf.endRunTx(tx, project, run, end(run), "", now)
		if err != nil {
			return result{}, err
		}
		done, err := e.earlyTx(tx, eas, now)
		return result{live: true, fx: fx, early: done}, err
	})
	if err != nil {
		return false, err
	}
	e.disp.apply(res.fx)
	e.observeRunsEnded(res.fx)
	e.earlyCommitted(res.early)
	return res.live, nil
}

// settled implements runHooks: a run's failure callback ended, so its failure function's
// state is known.
func (w *runs) settled(tx *storage.Tx, m *Message, state string) error {
	if m.Kind != storage.KindFailureCallback {
		return nil
	}
	run, err := tx.Run(m.Project, m.RunID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil // swept meanwhile
	}
	if err != nil || run.FailureMessageID != m.ID {
		return err
	}
	run.FailureState = callbackFail
	if state == storage.StateDelivered {
		run.FailureState = callbackSuccess
	}
	return tx.PutRun(m.Project, run)
}

// failed implements runHooks: the run fails, its other pending messages are dropped and
// an invoking parent is resumed with isFailed.
func (w *runs) failed(tx *storage.Tx, m *Message, dlqID string, now time.Time) (effects, error) {
	run, err := tx.Run(m.Project, m.RunID)
	if errors.Is(err, storage.ErrNotFound) {
		return effects{}, nil
	}
	if err != nil || !run.Live() {
		return effects{}, err
	}
	run.DLQID = dlqID
	return w.endRunTx(tx, m.Project, run, RunFailed, m.ID, now)
}

// initialPayload is the run's first history entry (the trigger's body).
func initialPayload(tx *storage.Tx, project, runID string) ([]byte, error) {
	h, err := tx.History(project, runID, 1)
	if err != nil || len(h) == 0 {
		return nil, err
	}
	return h[0].Body, nil
}

// bindCallback implements runHooks: a callback message created after an attempt of a
// workflow message gets a fromCallback entry in the history, the run's headers and
// configuration; a failure callback gets the run's fields in its body (docs/protocol.md,
// "Callbacks and failure callbacks").
func (w *runs) bindCallback(tx *storage.Tx, cb, src *Message, out Outcome, dlqID string, now time.Time) (bool, error) {
	run, err := tx.Run(cb.Project, cb.RunID)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch cb.Kind {
	case storage.KindFailureCallback:
		if dlqID != "" {
			p := callbackPayloadFor(src, out, dlqID)
			if err := workflowFailureFields(&p, tx, src); err != nil {
				return false, err
			}
			cb.Body = wire.MustCompactJSON(p)
		}
		cb.CallType = CallFailure
		cb.Header = runHeaders(cb.Header, run)
		cb.FlowControl, cb.FlowExtra, cb.OrderAt, cb.PriorityShiftMs = run.FlowControl, run.FlowExtra, run.OrderAt(), run.PriorityShiftMs
		run.FailureMessageID, run.FailureState = cb.ID, callbackInProgress
		if err := tx.PutRun(cb.Project, run); err != nil {
			return false, err
		}
		return true, tx.LinkRunMessage(cb.Project, run.ID, cb.ID)
	default:
		if !run.Live() {
			return false, nil
		}
		cb.CallType = CallFromCallback
		retries, delay, fc := run.Retries, run.RetryDelay, run.FailureCallback
		if err := w.appendStepTx(tx, run, cb, now); err != nil {
			return false, err
		}
		cb.Retries, cb.RetryDelay, cb.FailureCallback, cb.FlowControl, cb.FlowExtra = retries, delay, fc, run.FlowControl, run.FlowExtra
		cb.OrderAt, cb.PriorityShiftMs = run.OrderAt(), run.PriorityShiftMs
		cb.Labels = run.Labels
		cb.Header = runHeaders(cb.Header, run)
		return true, nil
	}
}

// workflowFailureFields adds the workflow fields to a failure callback payload.
func workflowFailureFields(p *wire.CallbackPayload, tx *storage.Tx, m *Message) error {
	run, err := tx.Run(m.Project, m.RunID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	initial, err := initialPayload(tx, m.Project, m.RunID)
	if err != nil {
		return err
	}
	p.WorkflowRunID, p.WorkflowCreatedAt = run.ID, run.CreatedAt
	p.URL = run.URL
	p.SourceBody = base64.StdEncoding.EncodeToString(initial)
	return nil
}

package delivery

import (
	"encoding/base64"
	"errors"
	"fmt"
	"time"

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

// internalIDs are ids made before a transaction that may create messages internally
// (the transaction may run twice, so it must not make ids itself).
type internalIDs struct {
	msg, log string
}

func (e *Engine) newInternalIDs(now time.Time) internalIDs {
	return internalIDs{msg: e.ids.New(storage.PrefixMessage, now), log: e.ids.New(storage.PrefixLog, now)}
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
// message the SDK asked for (its headers, parsed); body is the step object.
func (e *Engine) publishStepTx(tx *storage.Tx, template *Message, body []byte, ids internalIDs, now time.Time) (*storage.DueEntry, error) {
	m := *template
	m.Body = body
	m.CallType = CallStep
	prepare(&m, ids.msg, now)
	if err := e.continueRunTx(tx, &m, now); errors.Is(err, errDuplicateStep) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	log := &storage.LogEvent{ID: ids.log, Time: now.UnixMilli(), State: storage.StateCreated, MessageID: m.ID, URL: m.URL, Labels: m.Labels, NextDeliveryTime: m.DueAt / int64(time.Millisecond)}
	if err := putNew(tx, &m, log); err != nil {
		return nil, err
	}
	d := storage.DueWith(&m)
	return &d, nil
}

// endRunTx moves a live run to a final state, drops its pending messages (but keep) and
// waiters unless it succeeded, and resumes an invoking parent. It returns the parent's resumption entry.
func (e *Engine) endRunTx(tx *storage.Tx, project string, run *Run, state string, keep string, ids internalIDs, now time.Time) (*storage.DueEntry, error) {
	run.State, run.EndedAt = state, now.UnixMilli()
	// A cancelled or failed run's pending work is dropped. A successful run's is not: the
	// delivery that completed it is still in flight, and its outcome is still recorded.
	if state != RunSuccess {
		if err := e.dropRunMessagesTx(tx, project, run.ID, keep); err != nil {
			return nil, err
		}
	}
	if err := tx.PutRun(project, run); err != nil {
		return nil, err
	}
	if run.Parent == nil {
		return nil, nil
	}
	out := map[string]any{"isFailed": state == RunFailed, "isCanceled": state == RunCanceled}
	if state == RunSuccess && run.HasResp {
		out["body"] = string(run.Response)
	}
	step, err := stepWith(run.Parent.Step, map[string]any{"out": string(compactJSON(out))})
	if err != nil {
		return nil, err
	}
	due, err := e.publishStepTx(tx, run.Parent.Template, step, ids, now)
	if errors.Is(err, ErrRunEnded) || errors.Is(err, storage.ErrNotFound) {
		return nil, nil // the parent ended meanwhile: nobody to resume
	}
	return due, err
}

// dropRunMessagesTx removes a run's pending messages (except keep) with their due entries,
// and the waiters their timers guard.
func (e *Engine) dropRunMessagesTx(tx *storage.Tx, project, runID, keep string) error {
	ids, err := tx.RunMessages(project, runID)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if id == keep {
			continue
		}
		if m, err := tx.Message(project, id); err == nil {
			if err := tx.DeleteDue(storage.DueOf(m)); err != nil {
				return err
			}
			if err := tx.DeleteMessage(project, id); err != nil {
				return err
			}
			if m.Kind == storage.KindWaitTimeout {
				if err := tx.DeleteWaiter(project, m.EventID, runID); err != nil {
					return err
				}
			}
		}
		if err := tx.UnlinkRunMessage(project, runID, id); err != nil {
			return err
		}
	}
	return nil
}

// CompleteRun marks a run successful with the route function's return value (body; hasBody
// false when it returned undefined) and resumes an invoking parent. Completing an ended
// run changes nothing.
func (e *Engine) CompleteRun(project, runID string, body []byte, hasBody bool) error {
	return e.finishRun(project, runID, func(run *Run) string {
		run.Response, run.HasResp = body, hasBody
		return RunSuccess
	})
}

// CancelRun cancels a live run: its pending messages and waiters are dropped and an
// invoking parent is resumed with isCanceled. It returns whether the run was live.
func (e *Engine) CancelRun(project, runID string) (bool, error) {
	live := false
	err := e.finishRun(project, runID, func(*Run) string { live = true; return RunCanceled })
	return live, err
}

func (e *Engine) finishRun(project, runID string, end func(*Run) string) error {
	now := e.now()
	ids := e.newInternalIDs(now)
	var due *storage.DueEntry
	err := e.store.Update(func(tx *storage.Tx) error {
		due = nil
		run, err := tx.Run(project, runID)
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("%w: %q", ErrRunNotFound, runID)
		}
		if err != nil || !run.Live() {
			return err
		}
		due, err = e.endRunTx(tx, project, run, end(run), "", ids, now)
		return err
	})
	if err == nil && due != nil {
		e.disp.add(*due)
	}
	return err
}

// workflowFailureTx is the workflow part of a delivery's final failure: the run fails,
// its other pending messages are dropped, the failure callback gets the workflow fields
// (§4.5) and an invoking parent is resumed with isFailed.
func (e *Engine) workflowFailureTx(tx *storage.Tx, m *Message, dlqID string, ids internalIDs, now time.Time) (*Run, *storage.DueEntry, error) {
	run, err := tx.Run(m.Project, m.RunID)
	if err != nil || !run.Live() {
		return nil, nil, nil
	}
	run.DLQID = dlqID
	due, err := e.endRunTx(tx, m.Project, run, RunFailed, m.ID, ids, now)
	return run, due, err
}

// initialPayload is the run's first history entry (the trigger's body).
func initialPayload(tx *storage.Tx, project, runID string) []byte {
	h, err := tx.History(project, runID, 1)
	if err != nil || len(h) == 0 {
		return nil
	}
	return h[0].Body
}

// workflowCallbackTx binds a callback message created after an attempt of a workflow
// message to its run: a fromCallback entry in the history, the run's headers and
// configuration; a failure callback gets the run's id in its body. It returns false when
// the run has ended (no callback is then sent).
func (e *Engine) workflowCallbackTx(tx *storage.Tx, cb *Message, src *Message, now time.Time) (bool, error) {
	run, err := tx.Run(cb.Project, cb.RunID)
	if err != nil {
		return false, nil
	}
	switch cb.Kind {
	case storage.KindFailureCallback:
		cb.CallType = CallFailure
		cb.Header = runHeaders(cb.Header, run)
		cb.FlowControl, cb.OrderAt = run.FlowControl, run.CreatedAt
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
		if err := e.appendStepTx(tx, run, cb, now); err != nil {
			return false, err
		}
		cb.Retries, cb.RetryDelay, cb.FailureCallback, cb.FlowControl = retries, delay, fc, run.FlowControl
		cb.OrderAt = run.CreatedAt
		cb.Labels = run.Labels
		cb.Header = runHeaders(cb.Header, run)
		return true, nil
	}
}

// workflowFailureBody adds the workflow fields to a failure callback payload.
func workflowFailureFields(p *callbackPayload, tx *storage.Tx, m *Message) {
	run, err := tx.Run(m.Project, m.RunID)
	if err != nil {
		return
	}
	p.WorkflowRunID, p.WorkflowCreatedAt = run.ID, run.CreatedAt
	p.URL = run.URL
	p.SourceBody = base64.StdEncoding.EncodeToString(initialPayload(tx, m.Project, m.RunID))
}

package delivery

import (
	"errors"

	"github.com/duraton/duraton/storage"
)

// Step states of a run's delivery that has not recorded its step (the logs' "next" group,
// or a failed branch of a parallel group).
const (
	StepProgress = "STEP_PROGRESS"
	StepRetry    = "STEP_RETRY"
	StepFailed   = "STEP_FAILED"
)

// PendingStep is a workflow delivery of a run whose step is not recorded: in flight or
// waiting (StepProgress), waiting for a retry (StepRetry), or the one that failed the run
// (StepFailed, with the failed attempt's answer).
type PendingStep struct {
	MessageID  string
	CreatedAt  int64  // unix ms
	Body       []byte // the message's own entry: a step or plan step object
	State      string
	Retries    int
	RetryDelay string
	// Failure is the last attempt's answer of a StepFailed delivery, FailedAt its time.
	Failure  *storage.Response
	FailedAt int64
}

// pendingStepsTx reads what a run's logs show beyond its history: for a failed run, the
// delivery its dead letter holds (none once the dead letter is gone: resumed, restarted
// or deleted); for a live run, its workflow deliveries not yet answered.
func pendingStepsTx(tx *storage.Tx, project string, run *Run) ([]PendingStep, error) {
	switch {
	case run.State == RunFailed && run.DLQID != "":
		d, err := tx.DLQ(project, run.DLQID)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if !isWorkflowDelivery(&d.Message) {
			return nil, nil
		}
		resp := d.Response
		return []PendingStep{{
			MessageID: d.Message.ID, CreatedAt: d.Message.CreatedAt, Body: d.Message.Body, State: StepFailed,
			Retries: d.Message.Retries, RetryDelay: d.Message.RetryDelay,
			Failure: &resp, FailedAt: d.FailedAt,
		}}, nil
	case run.Live():
		ids, err := tx.RunMessages(project, run.ID)
		if err != nil {
			return nil, err
		}
		var out []PendingStep
		for _, id := range ids {
			m, err := tx.Message(project, id)
			if errors.Is(err, storage.ErrNotFound) {
				continue // answered meanwhile
			}
			if err != nil {
				return nil, err
			}
			if !isWorkflowDelivery(m) || m.HistoryLen == 0 {
				continue
			}
			state := StepProgress
			if m.State == storage.StateRetry {
				state = StepRetry
			}
			out = append(out, PendingStep{MessageID: m.ID, CreatedAt: m.CreatedAt, Body: m.Body, State: state, Retries: m.Retries, RetryDelay: m.RetryDelay})
		}
		return out, nil
	}
	return nil, nil
}

package delivery

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// RunError is why a run failed (GET /runs/{id} shows it); CancelledBy who cancelled it.
type (
	RunError    = storage.RunError
	CancelledBy = storage.CancelledBy
)

// maxRunErrorMessage bounds the message a run's error keeps of an endpoint's answer.
const maxRunErrorMessage = 512

// runErrorOf classifies the final outcome out of m, the delivery that failed its run,
// into the run's error: a stable code, a short message, the failing step when the
// endpoint or the call named it, and the last HTTP status.
func runErrorOf(m *Message, out Outcome) *RunError {
	e := &RunError{Status: out.Response.Status, Step: failedStepName(m, out)}
	detail := answerMessage(out.Response.Body)
	switch {
	case out.budget != nil:
		e.Code, e.Status = storage.ErrCodeBudgetExceeded, 0
		e.Message = out.Response.Error
	case out.Verdict == Retryable && strings.HasPrefix(out.Response.Error, "timed out"):
		e.Code = storage.ErrCodeTimeout
		e.Message = "the endpoint did not answer in time, " + attempts(m)
	case out.Verdict == Retryable:
		e.Code = storage.ErrCodeRetriesExhausted
		e.Message = out.Response.Error + ", " + attempts(m)
		if out.Response.Status > 0 {
			e.Message = "endpoint answered " + strconv.Itoa(out.Response.Status) + ", " + attempts(m)
		}
	case out.Fault == FaultInternal:
		e.Code, e.Message = storage.ErrCodeInternal, out.Response.Error
	default:
		e.Code, e.Message = storage.ErrCodeNonRetryable, out.Response.Error
	}
	if detail != "" {
		e.Message += ": " + detail
	}
	if len(e.Message) > maxRunErrorMessage {
		e.Message = e.Message[:maxRunErrorMessage]
	}
	return e
}

func attempts(m *Message) string {
	if m.Retried == 0 {
		return "1 attempt"
	}
	return strconv.Itoa(m.Retried+1) + " attempts"
}

// failedStepName is the step a failure names: the endpoint's Upstash-Error-Step-Name,
// or the step of a workflow call.
func failedStepName(m *Message, out Outcome) string {
	if name := http.Header(out.Response.Header).Get(wire.HeaderErrorStepName); name != "" {
		return name
	}
	if m.Callback != nil {
		if v := http.Header(m.Callback.Header).Get(wire.HeaderWorkflowStepName); v != "" {
			return v
		}
	}
	return ""
}

// answerMessage reads the "message" (else "error") of a JSON error answer, as the SDKs
// answer a failing step.
func answerMessage(body []byte) string {
	if len(body) == 0 || body[0] != '{' {
		return ""
	}
	var b struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	if b.Message != "" {
		return b.Message
	}
	return b.Error
}

// invokeFailed turns a run error into invoke_failed when the run's last recorded step
// is an invoke whose child failed or was cancelled: the run failed on its child's end.
func invokeFailed(tx *storage.Tx, project string, run *Run, e *RunError) {
	if e.Code == storage.ErrCodeBudgetExceeded || run.HistoryLen < 2 {
		return
	}
	h, err := tx.HistoryEntry(project, run.ID, run.HistoryLen-1)
	if err != nil || h.CallType != CallStep {
		return
	}
	var st struct {
		StepName string `json:"stepName"`
		StepType string `json:"stepType"`
		Out      string `json:"out"`
	}
	if json.Unmarshal(h.Body, &st) != nil || st.StepType != "Invoke" {
		return
	}
	var res struct {
		IsFailed   bool `json:"isFailed"`
		IsCanceled bool `json:"isCanceled"`
	}
	if json.Unmarshal([]byte(st.Out), &res) != nil || !(res.IsFailed || res.IsCanceled) {
		return
	}
	e.Code = storage.ErrCodeInvokeFailed
	if e.Step == "" {
		e.Step = st.StepName
	}
}

package wire

import (
	"encoding/json"
	"net/http"
)

// The JSON of workflow runs (docs/protocol.md, "Workflow runs"): the history delivered to an
// endpoint, run logs, workflow dead letters, waiters and notify results. Times are unix
// milliseconds unless said otherwise.

// Workflow run states (RunLog.State).
const (
	RunStarted  = "RUN_STARTED"
	RunSuccess  = "RUN_SUCCESS"
	RunFailed   = "RUN_FAILED"
	RunCanceled = "RUN_CANCELED"
)

// HistoryEntry is one element of a run's history, as delivered to the endpoint and as
// GET /v2/workflows/runs/{id} answers it (docs/protocol.md, "Steps"). Body encodes as standard,
// padded base64; the server sends "" rather than null for an empty body, which the
// official SDK decodes with atob.
type HistoryEntry struct {
	MessageID string `json:"messageId"`
	Body      []byte `json:"body"`
	CallType  string `json:"callType"`
}

// RunLogsPage is one page of workflow runs, newest first. Cursor is empty on the last
// page.
type RunLogsPage struct {
	Cursor string   `json:"cursor,omitempty"`
	Runs   []RunLog `json:"runs"`
}

// RunLog is one workflow run with its steps (the WorkflowRunLog of the workflow SDK).
type RunLog struct {
	RunID       string `json:"workflowRunId"`
	URL         string `json:"workflowUrl"`
	State       string `json:"workflowState"`
	CreatedAt   int64  `json:"workflowRunCreatedAt"`
	CompletedAt int64  `json:"workflowRunCompletedAt,omitempty"`
	// Response is the run's return value as the endpoint sent it (nil: none).
	Response *string `json:"workflowRunResponse,omitempty"`
	// Steps are the run's steps in order, grouped: a "sequential" group holds one step,
	// a "parallel" group the branches that ran together.
	Steps  []StepGroup `json:"steps"`
	Label  string      `json:"label,omitempty"`
	Labels []string    `json:"labels,omitempty"`
	// DLQID is the run's dead letter, when it failed.
	DLQID           string           `json:"dlqId,omitempty"`
	Invoker         *RunInvoker      `json:"invoker,omitempty"`
	FailureFunction *FailureCallback `json:"failureFunction,omitempty"`
	// Waiting is set while a delivery of the live run is held by flow control.
	Waiting *Waiting `json:"waiting,omitempty"`
	// Usage is what the run's AI steps spent (Duraton extension); an AI step's own usage
	// is its step's "usage" field, with the model.
	Usage *AIUsage `json:"usage,omitempty"`
}

// AIUsage is the spend of AI steps: tokens and USD cost, with the model for one step.
type AIUsage struct {
	Model        string  `json:"model,omitempty"`
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	Tokens       int64   `json:"tokens"`
	Cost         float64 `json:"cost"`
}

// StepGroup is a group of steps of a run log.
type StepGroup struct {
	Type  string    `json:"type"` // "sequential" or "parallel"
	Steps []StepLog `json:"steps"`
}

// StepLog is one step as the endpoint's SDK sent it (every field kept as raw JSON) plus
// the log fields messageId, callType, state and createdAt. The initial payload is step 0
// (stepType "Initial"). Use the accessors, or json.Unmarshal a field into your own type.
type StepLog map[string]json.RawMessage

// StepID is the step's "stepId" (0 when absent).
func (s StepLog) StepID() int {
	var n int
	s.get("stepId", &n)
	return n
}

// StepName is the step's "stepName".
func (s StepLog) StepName() string { return s.str("stepName") }

// StepType is the step's "stepType", e.g. Initial, Run, SleepFor, Call, Wait.
func (s StepLog) StepType() string { return s.str("stepType") }

// MessageID is the message that recorded the step.
func (s StepLog) MessageID() string { return s.str("messageId") }

// CallType is the step's "callType": step, toCallback or fromCallback.
func (s StepLog) CallType() string { return s.str("callType") }

// CreatedAt is when the step was recorded, unix ms.
func (s StepLog) CreatedAt() int64 {
	var n int64
	s.get("createdAt", &n)
	return n
}

// Out is the step's result as raw JSON (nil when absent). For a Run step it is usually a
// JSON string holding the JSON the step returned.
func (s StepLog) Out() json.RawMessage { return s["out"] }

func (s StepLog) str(key string) string {
	var v string
	s.get(key, &v)
	return v
}

func (s StepLog) get(key string, v any) {
	if raw, ok := s[key]; ok {
		_ = json.Unmarshal(raw, v) // a field of another type reads as the zero value
	}
}

// RunInvoker is the run that invoked this one (context.invoke).
type RunInvoker struct {
	RunID     string `json:"workflowRunId"`
	URL       string `json:"workflowUrl"`
	CreatedAt int64  `json:"workflowRunCreatedAt"`
}

// FailureCallback is the state of a run's failure callback (failure function).
type FailureCallback struct {
	MessageID string `json:"messageId"`
	URL       string `json:"url"`
	// State is CALLBACK_INPROGRESS, CALLBACK_SUCCESS or CALLBACK_FAIL.
	State string `json:"state"`
	DLQID string `json:"dlqId,omitempty"`
}

// WorkflowDLQMessage is a dead letter of a workflow run: the failed delivery plus its run.
type WorkflowDLQMessage struct {
	DLQMessage
	RunID string `json:"workflowRunId"`
	// WorkflowURL is empty (and WorkflowCreatedAt 0) when the run no longer exists.
	WorkflowURL         string           `json:"workflowUrl"`
	WorkflowCreatedAt   int64            `json:"workflowCreatedAt"`
	FailureCallbackInfo *FailureCallback `json:"failureCallbackInfo,omitempty"`
}

// WorkflowDLQPage is one page of workflow dead letters, newest first.
type WorkflowDLQPage struct {
	Cursor   string               `json:"cursor,omitempty"`
	Messages []WorkflowDLQMessage `json:"messages"`
}

// RunRef names a workflow run.
type RunRef struct {
	RunID     string `json:"workflowRunId"`
	CreatedAt int64  `json:"workflowCreatedAt"`
}

// ResumeResult answers a resume or restart of workflow dead letters.
type ResumeResult struct {
	Runs   []RunRef `json:"workflowRuns"`
	Cursor string   `json:"cursor,omitempty"`
}

// Waiter is a run waiting for an event (context.waitForEvent).
type Waiter struct {
	// URL receives the resumption (empty in a lookback answer).
	URL string `json:"url"`
	// Deadline is when the wait times out, unix seconds (0 in a lookback answer).
	Deadline       int64       `json:"deadline"`
	Headers        http.Header `json:"headers"`
	TimeoutURL     string      `json:"timeoutUrl"`
	TimeoutBody    string      `json:"timeoutBody,omitempty"`
	TimeoutHeaders http.Header `json:"timeoutHeaders"`
}

// NotifyResult is one run resumed by a notify, or (notify of one run, lookback) the run
// the event was kept for, with an empty MessageID.
type NotifyResult struct {
	Waiter    Waiter `json:"waiter"`
	MessageID string `json:"messageId"`
	Error     string `json:"error"`
	RunID     string `json:"workflowRunId,omitempty"`
	// RunCreatedAt is the run's creation time, unix ms, when the server says it.
	RunCreatedAt int64 `json:"workflowCreatedAt,omitempty"`
}

// WebhookCall is the request that called a workflow webhook, as the event data that resolves
// the run's wait for it (docs/protocol.md, "Waits, notify and webhooks"). Body encodes as
// standard base64.
type WebhookCall struct {
	Method string      `json:"method"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"`
	Proto  string      `json:"proto"` // "http" or "https"
	Host   string      `json:"host"`
	URL    string      `json:"url"` // the request URI
}

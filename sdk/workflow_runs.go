package sdk

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Workflow run states (RunLog.State, RunLogsRequest.State).
const (
	RunStarted  = "RUN_STARTED"
	RunSuccess  = "RUN_SUCCESS"
	RunFailed   = "RUN_FAILED"
	RunCanceled = "RUN_CANCELED"
)

// CancelRequest selects the live workflow runs Cancel cancels: RunIDs, or the runs
// matching the filters, or, with All, every live run.
type CancelRequest struct {
	RunIDs []string
	// URLPrefix keeps runs whose workflow URL starts with it; URL those whose workflow URL
	// is exactly it.
	URLPrefix, URL string
	Label          string
	FlowControlKey string
	// FromDate and ToDate bound the runs' creation time.
	FromDate, ToDate time.Time
	// Count caps the runs a filter cancels (server default and maximum 1,000).
	Count int
	// All must be set to cancel every live run with neither ids nor filters.
	All bool
}

// Cancel cancels live workflow runs (DELETE /v2/workflows/runs) and returns how many
// were cancelled; unknown or ended runs are skipped.
func (c *Client) Cancel(ctx context.Context, req CancelRequest) (int, error) {
	q := url.Values{}
	addQuery(q, "workflowRunIds", req.RunIDs)
	setWorkflowURL(q, req.URLPrefix, req.URL)
	setQuery(q, "label", req.Label)
	setQuery(q, "flowControlKey", req.FlowControlKey)
	setTime(q, "fromDate", req.FromDate)
	setTime(q, "toDate", req.ToDate)
	if len(q) == 0 && !req.All {
		return 0, errNoSelection("Cancel")
	}
	setInt(q, "count", req.Count)
	var out struct {
		Cancelled int `json:"cancelled"`
	}
	err := c.do(ctx, http.MethodDelete, "/v2/workflows/runs", q, nil, nil, &out)
	return out.Cancelled, err
}

// setWorkflowURL sets the workflowUrl filter: a prefix, or with exact an exact match.
func setWorkflowURL(q url.Values, prefix, exact string) {
	switch {
	case exact != "":
		q.Set("workflowUrl", exact)
		q.Set("workflowUrlExactMatch", "true")
	case prefix != "":
		q.Set("workflowUrl", prefix)
	}
}

// RunLogsRequest selects one page of workflow runs. Empty fields match every run.
type RunLogsRequest struct {
	RunID string
	// State is one of RunStarted, RunSuccess, RunFailed, RunCanceled.
	State string
	// URL keeps runs whose workflow URL is exactly it; URLPrefix those starting with it.
	URL, URLPrefix string
	Label          string
	FlowControlKey string
	// Cursor is the Cursor of a previous page.
	Cursor string
	// Count is the page size (server default 100, at most 1,000).
	Count int
}

// RunLogsPage is one page of workflow runs, newest first. Cursor is empty on the last
// page.
type RunLogsPage struct {
	Cursor string   `json:"cursor,omitempty"`
	Runs   []RunLog `json:"runs"`
}

// RunLog is one workflow run with its steps (the WorkflowRunLog of the workflow SDK).
// Times are unix milliseconds.
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

// RunInvoker is the run that invoked this one (context.Invoke).
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

// RunLogs lists one page of workflow runs with their steps (GET /v2/workflows/events).
func (c *Client) RunLogs(ctx context.Context, req RunLogsRequest) (RunLogsPage, error) {
	q := url.Values{"groupBy": {"workflowRunId"}}
	setQuery(q, "workflowRunId", req.RunID)
	setQuery(q, "state", req.State)
	setWorkflowURL(q, req.URLPrefix, req.URL)
	setQuery(q, "label", req.Label)
	setQuery(q, "flowControlKey", req.FlowControlKey)
	setQuery(q, "cursor", req.Cursor)
	setInt(q, "count", req.Count)
	var out RunLogsPage
	err := c.do(ctx, http.MethodGet, "/v2/workflows/events", q, nil, nil, &out)
	return out, err
}

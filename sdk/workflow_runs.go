package sdk

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// Workflow run states (RunLog.State, RunLogsRequest.State).
const (
	RunStarted  = wire.RunStarted
	RunSuccess  = wire.RunSuccess
	RunFailed   = wire.RunFailed
	RunCanceled = wire.RunCanceled
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
	var out wire.CancelResult
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

// The JSON types of run logs are the protocol's own (package wire); the SDK re-exports
// them.
type (
	// RunLogsPage is one page of workflow runs, newest first. Cursor is empty on the last
	// page.
	RunLogsPage = wire.RunLogsPage
	// RunLog is one workflow run with its steps (the WorkflowRunLog of the workflow SDK).
	RunLog = wire.RunLog
	// StepGroup is a group of steps of a run log.
	StepGroup = wire.StepGroup
	// StepLog is one step of a run log, every field kept as raw JSON; see its accessors.
	StepLog = wire.StepLog
	// RunInvoker is the run that invoked this one (Context.Invoke).
	RunInvoker = wire.RunInvoker
	// FailureCallback is the state of a run's failure callback (failure function).
	FailureCallback = wire.FailureCallback
)

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

package sdk

import (
	"context"
	"net/http"
	"net/url"

	"github.com/duraton/duraton/sdk/wire"
)

// WorkflowDLQMessage is a dead letter of a workflow run: the failed delivery plus its run.
type WorkflowDLQMessage = wire.WorkflowDLQMessage

// WorkflowDLQRequest selects one page of workflow dead letters. Empty fields match all.
type WorkflowDLQRequest struct {
	DLQIDs []string
	RunID  string
	// URL keeps runs whose workflow URL is exactly it; URLPrefix those starting with it.
	URL, URLPrefix string
	Label          string
	// ResponseStatus keeps dead letters whose last answer had this status.
	ResponseStatus int
	// Cursor is the Cursor of a previous page.
	Cursor string
	// Count is the page size (server default 100, at most 1,000).
	Count int
}

// WorkflowDLQPage is one page of workflow dead letters, newest first.
type WorkflowDLQPage = wire.WorkflowDLQPage

// RunRef names a workflow run.
type RunRef = wire.RunRef

// WorkflowDLQ lists one page of the dead letters of workflow runs (GET /v2/workflows/dlq).
func (c *Client) WorkflowDLQ(ctx context.Context, req WorkflowDLQRequest) (WorkflowDLQPage, error) {
	q := url.Values{}
	addQuery(q, "dlqIds", req.DLQIDs)
	setQuery(q, "workflowRunId", req.RunID)
	setWorkflowURL(q, req.URLPrefix, req.URL)
	setQuery(q, "label", req.Label)
	setInt(q, "responseStatus", req.ResponseStatus)
	setQuery(q, "cursor", req.Cursor)
	setInt(q, "count", req.Count)
	var out WorkflowDLQPage
	err := c.do(ctx, http.MethodGet, "/v2/workflows/dlq", q, nil, nil, &out)
	return out, err
}

// ResumeRuns makes the failed runs of the given dead letters live again, sending the
// failed delivery again with the same history (POST /v2/workflows/dlq/resume), and
// returns the runs resumed. Dead letters of runs that are not failed are skipped.
func (c *Client) ResumeRuns(ctx context.Context, dlqIDs ...string) ([]RunRef, error) {
	return c.resumeOrRestart(ctx, "ResumeRuns", "/v2/workflows/dlq/resume", dlqIDs)
}

// RestartRuns starts the failed runs of the given dead letters over from their initial
// payload (POST /v2/workflows/dlq/restart) and returns the runs restarted.
func (c *Client) RestartRuns(ctx context.Context, dlqIDs ...string) ([]RunRef, error) {
	return c.resumeOrRestart(ctx, "RestartRuns", "/v2/workflows/dlq/restart", dlqIDs)
}

func (c *Client) resumeOrRestart(ctx context.Context, call, path string, dlqIDs []string) ([]RunRef, error) {
	if len(dlqIDs) == 0 {
		return nil, errEmpty(call, "a dlq id")
	}
	q := url.Values{}
	addQuery(q, "dlqIds", dlqIDs)
	var out wire.ResumeResult
	err := c.do(ctx, http.MethodPost, path, q, nil, nil, &out)
	return out.Runs, err
}

// DeleteWorkflowDLQ deletes the given workflow dead letters (DELETE /v2/workflows/dlq)
// and returns how many were deleted.
func (c *Client) DeleteWorkflowDLQ(ctx context.Context, dlqIDs ...string) (int, error) {
	if len(dlqIDs) == 0 {
		return 0, errEmpty("DeleteWorkflowDLQ", "a dlq id")
	}
	q := url.Values{}
	addQuery(q, "dlqIds", dlqIDs)
	var out wire.DeleteResult
	err := c.do(ctx, http.MethodDelete, "/v2/workflows/dlq", q, nil, nil, &out)
	return out.Deleted, err
}

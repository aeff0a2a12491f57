package sdk

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// The native run routes (docs/protocol.md, "Native workflows"): read, search, cancel and
// replay runs of native workflows, one by one or in bulk, and read the flow state and
// run counts.

// The JSON types of the native run routes, re-exported from sdk/wire.
type (
	// NativeRun is a run of a native workflow with its steps.
	NativeRun = wire.NativeRun
	// NativeStep is one step of a NativeRun.
	NativeStep = wire.NativeStep
	// NativeRunError says why a run failed (Code: wire.RunErr*).
	NativeRunError = wire.NativeRunError
	// NativeRunsPage is a page of ListRuns.
	NativeRunsPage = wire.NativeRunsPage
	// NativeRunStats counts the live native runs.
	NativeRunStats = wire.NativeRunStats
	// BulkRunsResult is what CancelRuns or ReplayRuns did.
	BulkRunsResult = wire.BulkRunsResult
	// FlowState is the native workflows' gate backlogs and the project ceiling.
	FlowState = wire.FlowState
)

// RunFilter selects native runs; the fields combine with AND and empty ones select
// everything.
type RunFilter struct {
	Workflow, App string
	// Status is queued, running, sleeping, waiting, succeeded, failed or cancelled.
	Status string
	Label  string
	// EventName keeps runs started by an event of this name.
	EventName string
	// From and To bound the runs' creation time (inclusive; zero leaves a side open).
	From, To time.Time
	// Q is a CEL condition over the run's triggering event, e.g.
	// `event.data.accountId == "a1"`.
	Q string
}

func (f RunFilter) empty() bool { return f == RunFilter{} }

func (f RunFilter) query(q url.Values) {
	setQuery(q, "workflow", f.Workflow)
	setQuery(q, "app", f.App)
	setQuery(q, "status", f.Status)
	setQuery(q, "label", f.Label)
	setQuery(q, "eventName", f.EventName)
	setQuery(q, "q", f.Q)
	if !f.From.IsZero() {
		q.Set("from", strconv.FormatInt(f.From.UnixMilli(), 10))
	}
	if !f.To.IsZero() {
		q.Set("to", strconv.FormatInt(f.To.UnixMilli(), 10))
	}
}

// GetRun reads one native run with its steps (GET /runs/{id}).
func (c *Client) GetRun(ctx context.Context, runID string) (*NativeRun, error) {
	if runID == "" {
		return nil, errEmpty("GetRun", "run id")
	}
	var out NativeRun
	if err := c.do(ctx, http.MethodGet, "/runs/"+seg(runID), nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListRuns lists native runs matching f, newest first (GET /runs): limit per page (0:
// the server's default), from cursor (the previous page's NativeRunsPage.Cursor; ""
// from the newest). A page may hold fewer than limit runs and still have a cursor.
func (c *Client) ListRuns(ctx context.Context, f RunFilter, cursor string, limit int) (NativeRunsPage, error) {
	q := url.Values{}
	f.query(q)
	setQuery(q, "cursor", cursor)
	setInt(q, "limit", limit)
	var out NativeRunsPage
	err := c.do(ctx, http.MethodGet, "/runs", q, nil, nil, &out)
	return out, err
}

// CancelRun cancels a live native run and returns it after the cancel. A run that
// already ended is an *APIError with status 409.
func (c *Client) CancelRun(ctx context.Context, runID string) (*NativeRun, error) {
	if runID == "" {
		return nil, errEmpty("CancelRun", "run id")
	}
	var out NativeRun
	if err := c.do(ctx, http.MethodPost, "/runs/"+seg(runID)+"/cancel", nil, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReplayRun re-runs a failed native run from its failed step, its history kept, with
// cp (nil: kept) as its AI cap from now on.
func (c *Client) ReplayRun(ctx context.Context, runID string, cp *Cap) (*NativeRun, error) {
	if runID == "" {
		return nil, errEmpty("ReplayRun", "run id")
	}
	body := map[string]any{}
	if cp != nil {
		body["cap"] = cp
	}
	var out NativeRun
	if err := c.doJSON(ctx, http.MethodPost, "/runs/"+seg(runID)+"/replay", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BulkRuns selects the runs of CancelRuns and ReplayRuns.
type BulkRuns struct {
	Filter RunFilter
	// All must be set to act on every run of the project with an empty Filter.
	All bool
	// DryRun only counts.
	DryRun bool
	// Cursor goes on from a previous answer's BulkRunsResult.Cursor.
	Cursor string
	// Limit bounds the matching runs one call handles (0: the server's 1,000).
	Limit int
	// Cap is ReplayRuns' AI cap for the resumed runs (nil: kept).
	Cap *Cap
}

func (b BulkRuns) body(call string) (map[string]any, error) {
	if b.Filter.empty() && !b.All {
		return nil, errNoSelection(call)
	}
	out := map[string]any{}
	q := url.Values{}
	b.Filter.query(q)
	for k := range q {
		out[k] = q.Get(k)
	}
	for k, v := range map[string]bool{"all": b.All, "dryRun": b.DryRun} {
		if v {
			out[k] = true
		}
	}
	if b.Cursor != "" {
		out["cursor"] = b.Cursor
	}
	if b.Limit != 0 {
		out["limit"] = b.Limit
	}
	if b.Cap != nil {
		out["cap"] = b.Cap
	}
	return out, nil
}

// CancelRuns cancels every live native run b selects (POST /runs/cancel), at most
// b.Limit per call: follow BulkRunsResult.Cursor while it is not empty.
func (c *Client) CancelRuns(ctx context.Context, b BulkRuns) (BulkRunsResult, error) {
	return c.bulkRuns(ctx, "CancelRuns", "/runs/cancel", b)
}

// ReplayRuns replays every failed native run b selects from its failed step (POST
// /runs/replay), at most b.Limit per call: follow BulkRunsResult.Cursor.
func (c *Client) ReplayRuns(ctx context.Context, b BulkRuns) (BulkRunsResult, error) {
	return c.bulkRuns(ctx, "ReplayRuns", "/runs/replay", b)
}

func (c *Client) bulkRuns(ctx context.Context, call, path string, b BulkRuns) (BulkRunsResult, error) {
	var out BulkRunsResult
	body, err := b.body(call)
	if err != nil {
		return out, err
	}
	err = c.doJSON(ctx, http.MethodPost, path, nil, body, &out)
	return out, err
}

// RunStats counts the project's live native runs (GET /runs/stats).
func (c *Client) RunStats(ctx context.Context) (NativeRunStats, error) {
	var out NativeRunStats
	err := c.do(ctx, http.MethodGet, "/runs/stats", nil, nil, nil, &out)
	return out, err
}

// FlowState reads the native workflows' gate states (GET /flow-state), of app and of
// workflow when given.
func (c *Client) FlowState(ctx context.Context, app, workflow string) (*FlowState, error) {
	q := url.Values{}
	setQuery(q, "app", app)
	setQuery(q, "workflow", workflow)
	var out FlowState
	if err := c.do(ctx, http.MethodGet, "/flow-state", q, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DecodeOut decodes a step's out into v.
func DecodeOut(s NativeStep, v any) error { return json.Unmarshal(s.Out, v) }

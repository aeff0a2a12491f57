package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/sdk/wire"
)

// runFilters are the filters of run logs, bulk cancel and the workflow DLQ.
type runFilters struct {
	runID                                                              string
	urlPrefix, url, label, state, callerIP, flowControlKey, host, path multi
	createdAt, fromMs, toMs                                            int64
}

func parseRunFilters(c echo.Context) (runFilters, error) {
	q := c.QueryParams()
	f := runFilters{
		runID: q.Get("workflowRunId"), label: values(q, "label"), state: values(q, "state"),
		callerIP: values(q, "callerIp"), flowControlKey: values(q, "flowControlKey"), host: values(q, "host"), path: values(q, "path"),
	}
	if u := values(q, "workflowUrl"); len(u) > 0 {
		if q.Get("workflowUrlExactMatch") == "true" {
			f.url = u
		} else {
			f.urlPrefix = u
		}
	}
	for _, st := range f.state {
		switch st {
		case delivery.RunStarted, delivery.RunSuccess, delivery.RunFailed, delivery.RunCanceled:
		default:
			return f, badRequest("state: want RUN_STARTED, RUN_SUCCESS, RUN_FAILED or RUN_CANCELED, got %q", st)
		}
	}
	var err error
	if f.fromMs, err = msParam(q, "fromDate"); err != nil {
		return f, err
	}
	if f.toMs, err = msParam(q, "toDate"); err != nil {
		return f, err
	}
	if f.createdAt, err = msParam(q, "workflowCreatedAt"); err != nil {
		return f, err
	}
	return f, nil
}

func (f runFilters) match(r *delivery.Run) bool {
	var fcKey string
	if r.FlowControl != nil {
		fcKey = r.FlowControl.Key
	}
	switch {
	case f.runID != "" && r.ID != f.runID,
		!f.url.admits(r.URL),
		!f.urlPrefix.admitsPrefixOf(r.URL),
		!f.label.admitsAny(r.Labels),
		!f.state.admits(r.State),
		!f.callerIP.admits(r.CallerIP),
		!f.flowControlKey.admits(fcKey),
		f.createdAt != 0 && r.CreatedAt != f.createdAt,
		f.fromMs != 0 && r.CreatedAt < f.fromMs,
		f.toMs != 0 && r.CreatedAt > f.toMs:
		return false
	}
	if len(f.host) > 0 || len(f.path) > 0 {
		host, path := splitURL(r.URL)
		if !f.host.admits(host) || !f.path.admits(path) {
			return false
		}
	}
	return true
}

func splitURL(raw string) (host, path string) {
	rest := raw
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	host, path, _ = strings.Cut(rest, "/")
	path, _, _ = strings.Cut("/"+path, "?")
	return host, path
}

// runLogHandlers serve workflow run logs. The SDK calls /v2/workflows/events, the docs
// name /v2/workflows/logs: both are served.
type runLogHandlers struct {
	engine interface {
		Runs(ctx context.Context, project string, after *delivery.RunCursor, count int, keep func(*delivery.Run) bool) ([]delivery.RunWithHistory, *delivery.RunCursor, error)
		RunWaitReason(ctx context.Context, project, runID string) (reason string, since time.Time, ok bool, err error)
	}
}

func (h *runLogHandlers) register(g *echo.Group) {
	g.GET("/workflows/events", h.list)
	g.GET("/workflows/logs", h.list)
}

func (h *runLogHandlers) list(c echo.Context) error {
	f, err := parseRunFilters(c)
	if err != nil {
		return err
	}
	count, err := parseCount(c, defaultCount, maxCount)
	if err != nil {
		return err
	}
	after, err := parseRunCursor(c.QueryParam("cursor"))
	if err != nil {
		return err
	}
	msgID := c.QueryParam("messageId")
	keep := f.match
	runs, next, err := h.engine.Runs(c.Request().Context(), projectOf(c), after, count, keep)
	if err != nil {
		return err
	}
	out := wire.RunLogsPage{Runs: make([]wire.RunLog, 0, len(runs)), Cursor: formatRunCursor(next)}
	for i := range runs {
		if msgID != "" && !runHasMessage(&runs[i], msgID) {
			continue
		}
		v := toRunLogView(&runs[i])
		if runs[i].Live() {
			reason, since, ok, err := h.engine.RunWaitReason(c.Request().Context(), projectOf(c), runs[i].ID)
			if err != nil {
				return err
			}
			if ok {
				v.Waiting = &wire.Waiting{Reason: reason, Since: since.UnixMilli()}
			}
		}
		out.Runs = append(out.Runs, v)
	}
	return c.JSON(http.StatusOK, out)
}

func runHasMessage(r *delivery.RunWithHistory, id string) bool {
	for _, e := range r.History {
		if e.MessageID == id {
			return true
		}
	}
	return false
}

func parseRunCursor(s string) (*delivery.RunCursor, error) {
	c, err := native.ParseCursor(s)
	if err != nil {
		return nil, nativeError(err)
	}
	return c, nil
}

func formatRunCursor(c *delivery.RunCursor) string { return native.FormatCursor(c) }

// toRunLogView is a WorkflowRunLog of the workflow SDK.
func toRunLogView(r *delivery.RunWithHistory) wire.RunLog {
	v := wire.RunLog{
		RunID: r.ID, URL: r.URL, State: r.State,
		CreatedAt: r.CreatedAt, CompletedAt: r.EndedAt,
		Label: firstLabel(r.Labels), Labels: r.Labels, DLQID: r.DLQID,
		Steps: withPending(stepGroups(r.History), r.Pending),
	}
	if u := r.AIUsage; u != nil {
		v.Usage = &wire.AIUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Tokens: u.Tokens, Cost: u.Cost}
	}
	if r.HasResp {
		s := string(r.Response)
		v.Response = &s
	}
	if p := r.Parent; p != nil {
		v.Invoker = &wire.RunInvoker{RunID: p.RunID, URL: p.URL, CreatedAt: p.CreatedAt}
	}
	if r.FailureMessageID != "" {
		v.FailureFunction = &wire.FailureCallback{MessageID: r.FailureMessageID, URL: r.URL, State: r.FailureState, DLQID: r.DLQID}
		if r.FailureCallback != nil {
			v.FailureFunction.URL = r.FailureCallback.URL
		}
	}
	return v
}

// stepGroups turns a run's history into the SDK's step log groups: the initial payload,
// then each step result; results of a parallel group (concurrent > 1) share a group. Plan
// steps and call bookkeeping entries are left out. A step keeps every field its SDK sent,
// as sent.
func stepGroups(history []delivery.HistoryEntry) []wire.StepGroup {
	groups := []wire.StepGroup{}
	var open *wire.StepGroup
	want := 0
	ai := map[float64]json.RawMessage{} // AI usage by step id, from the calls' callbacks
	for _, e := range history {
		if u := e.AI; u != nil && u.StepID > 0 {
			ai[float64(u.StepID)] = rawJSON(wire.AIUsage{Model: u.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Tokens: u.Tokens, Cost: u.Cost})
		}
	}
	for i, e := range history {
		if e.CallType != delivery.CallStep {
			continue
		}
		var step wire.StepLog
		if i == 0 {
			step = wire.StepLog{
				"stepId": rawJSON(0), "stepName": rawJSON("init"), "stepType": rawJSON("Initial"),
				"out": rawJSON(string(e.Body)), "concurrent": rawJSON(1),
			}
		} else if err := json.Unmarshal(e.Body, &step); err != nil || step == nil {
			continue
		}
		var id, n float64
		_ = json.Unmarshal(step["stepId"], &id) // absent or not a number: 0
		_ = json.Unmarshal(step["concurrent"], &n)
		if i > 0 && id == 0 {
			continue // a plan step
		}
		step["messageId"], step["callType"] = rawJSON(e.MessageID), rawJSON(e.CallType)
		step["state"], step["createdAt"] = rawJSON("STEP_SUCCESS"), rawJSON(e.CreatedAt)
		if u, ok := ai[id]; ok {
			step["usage"] = u
		}
		if n <= 1 {
			groups = append(groups, wire.StepGroup{Type: "sequential", Steps: []wire.StepLog{step}})
			open = nil
			continue
		}
		if open == nil || len(open.Steps) >= want {
			groups = append(groups, wire.StepGroup{Type: "parallel"})
			open, want = &groups[len(groups)-1], int(n)
		}
		open.Steps = append(open.Steps, step)
	}
	return groups
}

// rawJSON encodes a plain value (a string or a number) for a StepLog.
func rawJSON(v any) json.RawMessage { return wire.MustCompactJSON(v) }

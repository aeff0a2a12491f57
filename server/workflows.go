package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// workflowEngine is what the workflow handlers call.
type workflowEngine interface {
	PublishAll(ctx context.Context, pubs []delivery.Publication) ([]delivery.PublishResult, error)
	CompleteRun(ctx context.Context, project, runID string, body []byte, hasBody bool) error
	CancelRun(ctx context.Context, project, runID string) (bool, error)
	CancelRuns(ctx context.Context, project string, ids []string, keep func(*delivery.Run) bool, limit int) (int, error)
	Run(ctx context.Context, project, runID string) (*delivery.RunWithHistory, error)
	Wait(ctx context.Context, r delivery.WaitRequest) error
	Notify(ctx context.Context, project, eventID, runID string, data []byte) ([]delivery.NotifyResult, bool, error)
	Waiters(ctx context.Context, project, eventID string) ([]delivery.Waiter, error)
	ProjectForUser(ctx context.Context, userID string) (string, error)
	CallWebhook(ctx context.Context, project, runID, eventID, secret string, data []byte) error
}

// workflowHandlers serve workflow runs: completion and cancel, lazy history fetch, bulk
// cancel, waits and notifies, webhooks and the trigger for callers without an SDK.
type workflowHandlers struct {
	engine workflowEngine
	cfg    Config
	limits publishLimits
	hooks  *hookLimiter
}

func (h *workflowHandlers) register(v2 *echo.Group, public *echo.Echo) {
	v2.DELETE("/workflows/runs/:id", h.endRun)
	v2.GET("/workflows/runs/:id", h.history)
	v2.DELETE("/workflows/runs", h.cancelMany)
	v2.POST("/wait/:eventId", h.wait)
	v2.POST("/notify/:eventId", h.notify)
	v2.POST("/notify/:runId/:eventId", h.notifyRun)
	v2.GET("/waiters/:eventId", h.waiters)
	v2.POST("/trigger/*", h.trigger)
	// Webhook URLs are called by third parties without a token: the secret the engine put
	// into the URL's last segment when the run created the webhook is the credential.
	public.Any("/v2/workflows/hooks/:userId/:runId/:eventId", h.hook)
}

func (h *workflowHandlers) parser() messageParser {
	return messageParser{limits: h.limits, destinations: h.cfg.CheckDestination, now: h.cfg.Now()}
}

// endRun is the SDK's completion (cancel=false, body = the route's return value) or its
// context.cancel() (cancel=true).
func (h *workflowHandlers) endRun(c echo.Context) error {
	if err := noQuery(c, "DELETE /v2/workflows/runs/{id}", "cancel"); err != nil {
		return err
	}
	id := c.Param("id")
	body, err := readBody(c, h.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	if c.QueryParam("cancel") == "true" {
		// As QStash: a run that is not live (unknown, or ended already) is a 404 worded
		// as the SDK's tests expect.
		live, err := h.engine.CancelRun(c.Request().Context(), projectOf(c), id)
		if errors.Is(err, delivery.ErrRunNotFound) || err == nil && !live {
			return notFound("workflowRun %s not found", id)
		}
		if err != nil {
			return err
		}
		return c.NoContent(http.StatusOK)
	}
	if err := h.engine.CompleteRun(c.Request().Context(), projectOf(c), id, body, len(body) > 0); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// history serves the SDK's lazy fetch: the run's history, or 404 once the run ended.
func (h *workflowHandlers) history(c echo.Context) error {
	run, err := h.engine.Run(c.Request().Context(), projectOf(c), c.Param("id"))
	if err != nil {
		return err
	}
	if !run.Live() {
		return notFound("workflow run %q has ended (%s)", run.ID, run.State)
	}
	out := make([]wire.HistoryEntry, len(run.History))
	for i, e := range run.History {
		body := e.Body
		if body == nil {
			body = []byte{} // "" not null: the SDK decodes it with atob
		}
		out[i] = wire.HistoryEntry{MessageID: e.MessageID, Body: body, CallType: e.CallType}
	}
	return c.JSON(http.StatusOK, out)
}

// maxBulkRunCancel caps the runs one filter-based cancel ends.
const maxBulkRunCancel = 1000

func (h *workflowHandlers) cancelMany(c echo.Context) error {
	if err := cancelRunsParams.check(c); err != nil {
		return err
	}
	q := c.QueryParams()
	ids := q["workflowRunIds"]
	if len(ids) > maxIDs {
		return badRequest("workflowRunIds: at most %d ids", maxIDs)
	}
	f, err := parseRunFilters(c)
	if err != nil {
		return err
	}
	limit, err := parseCount(c, maxBulkRunCancel, maxBulkRunCancel)
	if err != nil {
		return err
	}
	n, err := h.engine.CancelRuns(c.Request().Context(), projectOf(c), ids, f.match, limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.CancelResult{Cancelled: n})
}

// waitRequest is the body of POST /v2/wait/{eventId} (docs/protocol.md, "Waits, notify and
// webhooks").
type waitRequest struct {
	URL            string              `json:"url"`
	Timeout        json.RawMessage     `json:"timeout"`
	TimeoutURL     string              `json:"timeoutUrl"`
	TimeoutHeaders map[string][]string `json:"timeoutHeaders"`
	Step           json.RawMessage     `json:"step"`
}

// defaultWaitTimeout is the SDK's default ("7d").
const defaultWaitTimeout = 7 * 24 * time.Hour

func (h *workflowHandlers) wait(c echo.Context) error {
	raw, err := readBody(c, h.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	if err := validEventID(c.Param("eventId")); err != nil {
		return err
	}
	var req waitRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return badRequest("wait body must be {url, timeout, timeoutUrl, timeoutHeaders, step}: %v", err)
	}
	if len(req.Step) == 0 {
		return badRequest("wait body needs step")
	}
	timeout, text, err := parseWaitTimeout(req.Timeout)
	if err != nil {
		return err
	}
	p := h.parser()
	resume, err := p.template(c.Request().Header, req.URL)
	if err != nil {
		return err
	}
	timeoutURL := req.TimeoutURL
	if timeoutURL == "" {
		timeoutURL = req.URL
	}
	if _, err := p.checkURL("timeoutUrl", timeoutURL); err != nil {
		return err
	}
	timeoutHeaders := headerFromMap(req.TimeoutHeaders)
	if len(req.TimeoutHeaders) == 0 {
		timeoutHeaders = c.Request().Header
	} else if err := checkHeaderMap("timeoutHeaders", timeoutHeaders); err != nil {
		return err
	}
	onTimeout, err := p.template(timeoutHeaders, timeoutURL)
	if err != nil && len(req.TimeoutHeaders) > 0 {
		return prefixError("timeoutHeaders", err) // the URL passed: the headers are wrong
	}
	if err != nil {
		return err
	}
	project := projectOf(c)
	resume.Project, onTimeout.Project = project, project
	resume.CallerIP, onTimeout.CallerIP = c.RealIP(), c.RealIP()
	resume.Hops, onTimeout.Hops = hopsOf(c), hopsOf(c)
	err = h.engine.Wait(c.Request().Context(), delivery.WaitRequest{
		Project: project, EventID: c.Param("eventId"), RunID: resume.RunID,
		Timeout: timeout, TimeoutText: text, Step: req.Step, Resume: resume, OnTimeout: onTimeout,
		If: c.Request().Header.Get(wire.HeaderWaitIf),
	})
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// parseWaitTimeout reads the wait timeout: a duration string ("10s", "7d") or a number of
// seconds. Absent means the SDK default of 7 days.
func parseWaitTimeout(raw json.RawMessage) (time.Duration, string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return defaultWaitTimeout, "7d", nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		var secs float64
		if err := json.Unmarshal(raw, &secs); err != nil {
			return 0, "", badRequest("timeout: want a duration like \"10s\" or seconds, got %s", raw)
		}
		text = strconv.FormatFloat(secs, 'f', -1, 64) + "s"
	}
	d, err := parseDuration(text)
	if err != nil || d <= 0 {
		return 0, "", badRequest("timeout: want a positive duration like \"10s\" or \"7d\", got %q", text)
	}
	return d, text, nil
}

// toWaiterView is a Waiter as the API shows it.
func toWaiterView(w *delivery.Waiter) wire.Waiter {
	v := wire.Waiter{Deadline: w.Deadline / 1000, Headers: http.Header{}, TimeoutHeaders: http.Header{}}
	if w.Template != nil {
		v.URL = w.Template.URL
		maps.Copy(v.Headers, w.Template.Header)
	}
	if w.OnTimeout != nil {
		v.TimeoutURL = w.OnTimeout.URL
		maps.Copy(v.TimeoutHeaders, w.OnTimeout.Header)
	}
	// Both deliveries are the run's: they carry its id, as QStash shows them.
	if w.RunID != "" {
		for _, h := range []http.Header{v.Headers, v.TimeoutHeaders} {
			if len(h[wire.HeaderWorkflowRunID]) == 0 {
				h[wire.HeaderWorkflowRunID] = []string{w.RunID}
			}
		}
	}
	return v
}

// toNotifyViews are the resolved waiters of a notify answer.
func toNotifyViews(results []delivery.NotifyResult) []wire.NotifyResult {
	out := make([]wire.NotifyResult, len(results))
	for i, r := range results {
		out[i] = wire.NotifyResult{Waiter: toWaiterView(&r.Waiter), MessageID: r.MessageID, RunID: r.Waiter.RunID}
	}
	return out
}

func (h *workflowHandlers) notify(c echo.Context) error {
	if err := validEventID(c.Param("eventId")); err != nil {
		return err
	}
	data, err := readBody(c, h.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	res, more, err := h.engine.Notify(c.Request().Context(), projectOf(c), c.Param("eventId"), "", data)
	if err != nil {
		return err
	}
	if more {
		// The body stays the SDKs' array; the header says that more waiters of the
		// event were left waiting (a notify wakes a bounded number): notify again.
		c.Response().Header().Set(wire.HeaderNotifyPartial, "true")
	}
	return c.JSON(http.StatusOK, toNotifyViews(res))
}

// notifyRun notifies one run; if it is not waiting yet, the event is kept for it.
func (h *workflowHandlers) notifyRun(c echo.Context) error {
	if err := validEventID(c.Param("eventId")); err != nil {
		return err
	}
	data, err := readBody(c, h.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	runID := c.Param("runId")
	res, _, err := h.engine.Notify(c.Request().Context(), projectOf(c), c.Param("eventId"), runID, data) // one run: never partial
	if err != nil {
		return err
	}
	if len(res) == 0 {
		return c.JSON(http.StatusOK, wire.NotifyResult{RunID: runID})
	}
	return c.JSON(http.StatusOK, toNotifyViews(res)[0])
}

func (h *workflowHandlers) waiters(c echo.Context) error {
	if err := validEventID(c.Param("eventId")); err != nil {
		return err
	}
	ws, err := h.engine.Waiters(c.Request().Context(), projectOf(c), c.Param("eventId"))
	if err != nil {
		return err
	}
	out := make([]wire.Waiter, len(ws))
	for i := range ws {
		out[i] = toWaiterView(&ws[i])
	}
	return c.JSON(http.StatusOK, out)
}

// hook serves a webhook URL. Whatever is wrong with the call (unknown project, run or
// event, a wrong or missing secret, an event that is not a webhook's) it gets the answer
// of an unknown path: nothing tells a guesser which part was right.
func (h *workflowHandlers) hook(c echo.Context) error {
	if ok, wait := h.hooks.allow(c.RealIP()); !ok {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		return &apiError{status: http.StatusTooManyRequests, msg: "too many webhook calls from this address"}
	}
	// The body is read (and its limit applied) before anything is looked up, so a 413 says
	// nothing about the path either.
	body, err := readBody(c, h.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	eventID, secret, ok := delivery.SplitHookEvent(c.Param("eventId"))
	if !ok {
		return echo.ErrNotFound
	}
	project, err := h.engine.ProjectForUser(c.Request().Context(), c.Param("userId"))
	if errors.Is(err, delivery.ErrNotFound) {
		return echo.ErrNotFound
	}
	if err != nil {
		return err
	}
	r := c.Request()
	proto := "https"
	if r.TLS == nil {
		proto = "http"
	}
	if body == nil {
		body = []byte{} // "" not null
	}
	// What a webhook call resolves a WaitForWebhook with (docs/protocol.md, "Waits, notify and
	// webhooks").
	event := wire.MustCompactJSON(wire.WebhookCall{
		Method: r.Method, Header: r.Header, Body: body,
		Proto: proto, Host: r.Host, URL: r.URL.RequestURI(),
	})
	if err := h.engine.CallWebhook(c.Request().Context(), project, c.Param("runId"), eventID, secret, event); err != nil {
		if errors.Is(err, delivery.ErrHookNotFound) {
			return echo.ErrNotFound
		}
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "received"})
}

// triggerResponse answers /v2/trigger.
type triggerResponse struct {
	WorkflowRunID string `json:"workflowRunId"`
	MessageID     string `json:"messageId"`
	// WorkflowCreatedAt is the run's creation time in unix ms (what the SDK's
	// Upstash-Workflow-CreatedAt and the logs' workflowRunCreatedAt say).
	WorkflowCreatedAt int64 `json:"workflowCreatedAt"`
}

// trigger starts a run for a caller without an SDK (docs/protocol.md, "Starting a run"): the
// endpoint's SDK gets the history with Upstash-Workflow-Unknown-Sdk and re-triggers itself.
func (h *workflowHandlers) trigger(c echo.Context) error {
	dest := rawDestination(c.Request(), "/v2/trigger/")
	body, err := readBody(c, max(h.cfg.MaxWorkflowBodyBytes, h.cfg.MaxBodyBytes))
	if err != nil {
		return err
	}
	p := h.parser()
	m, err := p.parse(c.Request().Header, dest)
	if err != nil {
		return err
	}
	runID := c.Request().Header.Get(wire.HeaderWorkflowRunID)
	if runID == "" {
		runID = newRunID()
	} else if err := validRunID(runID); err != nil {
		return err
	}
	m.Project, m.Body, m.CallerIP, m.RunID, m.Hops = projectOf(c), body, c.RealIP(), runID, hopsOf(c)
	res, err := h.engine.PublishAll(c.Request().Context(), []delivery.Publication{{Message: m, Init: &delivery.RunInit{URL: m.URL, UnknownSdk: true}}})
	if err != nil {
		return err
	}
	if res[0].Deduplicated {
		return badRequest("workflow run %q already exists", runID)
	}
	return c.JSON(http.StatusCreated, triggerResponse{WorkflowRunID: runID, MessageID: res[0].MessageID, WorkflowCreatedAt: m.CreatedAt})
}

func newRunID() string {
	var b [15]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return "wfr_" + strings.TrimRight(base64.RawURLEncoding.EncodeToString(b[:]), "=")
}

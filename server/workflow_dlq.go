package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// workflowDLQHandlers serve the dead letters of workflow runs: list (also as
// /v2/dlq?source=workflow), resume, restart, re-run the failure callback, delete.
type workflowDLQHandlers struct {
	engine interface {
		WorkflowDLQ(ctx context.Context, project, cursor string, count int, keep func(*delivery.DLQEntry, *delivery.Run) bool) ([]delivery.DLQEntry, string, error)
		DeleteDLQ(ctx context.Context, project string, ids []string) (int, error)
		Run(ctx context.Context, project, runID string) (*delivery.RunWithHistory, error)
		ResumeRuns(ctx context.Context, project string, dlqIDs []string, restart bool, retries *int) ([]delivery.ResumedRun, error)
		RerunFailureCallback(ctx context.Context, project, dlqID string) (*delivery.Run, error)
	}
}

func (h *workflowDLQHandlers) register(g *echo.Group) {
	g.GET("/workflows/dlq", h.list)
	g.GET("/workflows/dlq/:dlqId", h.get)
	g.DELETE("/workflows/dlq", h.deleteMany)
	g.DELETE("/workflows/dlq/:dlqId", h.deleteOne)
	g.POST("/workflows/dlq/resume", h.resume)
	g.POST("/workflows/dlq/restart", h.restart)
	g.POST("/workflows/dlq/resume/:dlqId", h.resume)
	g.POST("/workflows/dlq/restart/:dlqId", h.restart)
	g.POST("/workflows/dlq/callback/:dlqId", h.callback)
}

// selection resolves a list or bulk request to one page of workflow dead letters.
func (h *workflowDLQHandlers) selection(c echo.Context) ([]delivery.DLQEntry, string, error) {
	lq, err := parseList(c, "dlqIds", delivery.PrefixDLQ, idAt(delivery.PrefixDLQ))
	if err != nil {
		return nil, "", err
	}
	if id := c.Param("dlqId"); id != "" {
		lq.ids = []string{id}
	}
	rf, err := parseRunFilters(c)
	if err != nil {
		return nil, "", err
	}
	project := projectOf(c)
	keep := func(d *delivery.DLQEntry, run *delivery.Run) bool {
		if len(lq.ids) > 0 && !contains(lq.ids, d.DLQID) {
			return false
		}
		return lq.f.admitsStatus(d.Response.Status) && lq.f.url.admits(d.Message.URL) && rf.match(run)
	}
	return h.engine.WorkflowDLQ(c.Request().Context(), project, lq.cursor, lq.count, keep)
}

// view is a workflow dead letter: the failed delivery plus its run.
func (h *workflowDLQHandlers) view(ctx context.Context, project string, d *delivery.DLQEntry) wire.WorkflowDLQMessage {
	v := wire.WorkflowDLQMessage{DLQMessage: toDLQView(d), RunID: d.Message.RunID}
	if run, err := h.engine.Run(ctx, project, d.Message.RunID); err == nil {
		v.WorkflowURL, v.WorkflowCreatedAt = run.URL, run.CreatedAt
		if run.FailureMessageID != "" {
			v.FailureCallbackInfo = &wire.FailureCallback{MessageID: run.FailureMessageID, State: run.FailureState, DLQID: d.DLQID}
			if run.FailureCallback != nil {
				v.FailureCallbackInfo.URL = run.FailureCallback.URL
			}
		}
	}
	return v
}

func (h *workflowDLQHandlers) list(c echo.Context) error {
	entries, next, err := h.selection(c)
	if err != nil {
		return err
	}
	out := wire.WorkflowDLQPage{Cursor: next, Messages: make([]wire.WorkflowDLQMessage, len(entries))}
	for i := range entries {
		out.Messages[i] = h.view(c.Request().Context(), projectOf(c), &entries[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (h *workflowDLQHandlers) get(c echo.Context) error {
	entries, _, err := h.selection(c)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return notFound("dlq message %q not found", c.Param("dlqId"))
	}
	return c.JSON(http.StatusOK, h.view(c.Request().Context(), projectOf(c), &entries[0]))
}

func (h *workflowDLQHandlers) deleteOne(c echo.Context) error {
	if err := noQuery(c, "DELETE /v2/workflows/dlq/{dlqId}"); err != nil {
		return err
	}
	entries, _, err := h.selection(c)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return notFound("dlq message %q not found", c.Param("dlqId"))
	}
	if _, err := h.engine.DeleteDLQ(c.Request().Context(), projectOf(c), dlqIDs(entries)); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

func (h *workflowDLQHandlers) deleteMany(c echo.Context) error {
	if err := workflowDLQParams.on("DELETE /v2/workflows/dlq").check(c); err != nil {
		return err
	}
	return deleteSelected(c, h.selection, h.engine.DeleteDLQ)
}

func (h *workflowDLQHandlers) resume(c echo.Context) error  { return h.resumeOrRestart(c, false) }
func (h *workflowDLQHandlers) restart(c echo.Context) error { return h.resumeOrRestart(c, true) }

func (h *workflowDLQHandlers) resumeOrRestart(c echo.Context, restart bool) error {
	route := "POST " + strings.Replace(c.Path(), ":dlqId", "{dlqId}", 1)
	if c.Param("dlqId") != "" {
		if err := noQuery(c, route); err != nil {
			return err
		}
	} else if err := workflowDLQParams.on(route).check(c); err != nil {
		return err
	}
	var retries *int
	if v := strings.TrimSpace(c.Request().Header.Get(wire.HeaderRetries)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return headerError(wire.HeaderRetries, "want a non-negative integer, got %q", v)
		}
		retries = &n
	}
	entries, next, err := h.selection(c)
	if err != nil {
		return err
	}
	runs, err := h.engine.ResumeRuns(c.Request().Context(), projectOf(c), dlqIDs(entries), restart, retries)
	if err != nil {
		return err
	}
	out := wire.ResumeResult{Cursor: next, Runs: make([]wire.RunRef, len(runs))}
	for i, r := range runs {
		out.Runs[i] = wire.RunRef{RunID: r.RunID, CreatedAt: r.CreatedAt}
	}
	return c.JSON(http.StatusOK, out)
}

type callbackRerunResponse struct {
	WorkflowRunID     string `json:"workflowRunId"`
	WorkflowCreatedAt int64  `json:"workflowCreatedAt"`
}

func (h *workflowDLQHandlers) callback(c echo.Context) error {
	run, err := h.engine.RerunFailureCallback(c.Request().Context(), projectOf(c), c.Param("dlqId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, callbackRerunResponse{WorkflowRunID: run.ID, WorkflowCreatedAt: run.CreatedAt})
}

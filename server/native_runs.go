package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/flowctl"
)

// NativeRuns is what the native run and flow-state routes need of the native unit.
type NativeRuns interface {
	Runs(ctx context.Context, project string, f native.RunFilter, after *delivery.RunCursor, limit int) ([]native.RunView, *delivery.RunCursor, error)
	Run(ctx context.Context, project, id string) (*native.RunView, error)
	CancelRun(ctx context.Context, project, id string) (*native.RunView, error)
	ReplayRunCap(ctx context.Context, project, id string, cp *flowctl.Cap) (*native.RunView, error)
	Stats(ctx context.Context, project string) (*native.RunStats, error)
	FlowState(ctx context.Context, project, app, workflow string) (*native.FlowState, error)
	CancelRuns(ctx context.Context, project string, req native.BulkRequest) (*native.BulkResult, error)
	ReplayRuns(ctx context.Context, project string, req native.BulkRequest) (*native.BulkResult, error)
}

func (h *nativeHandlers) registerRuns(g *echo.Group) {
	g.GET("/runs", h.listRuns)
	g.GET("/runs/stats", h.runStats)
	g.POST("/runs/cancel", h.bulkCancel) // native_bulk.go
	g.POST("/runs/replay", h.bulkReplay)
	g.GET("/runs/stream", h.runStream)
	g.GET("/runs/:id", h.getRun)
	g.GET("/runs/:id/events", h.runEvents)
	g.POST("/runs/:id/cancel", h.cancelRun)
	g.POST("/runs/:id/replay", h.replayRun)
	g.GET("/flow-state", h.flowState)
}

func (h *nativeHandlers) listRuns(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	q := c.QueryParams()
	for k, v := range q {
		switch k {
		case "workflow", "app", "status", "cursor", "limit", "from", "to", "label", "eventName", "q":
		default:
			return badRequest("%s: unknown parameter (want workflow, app, status, from, to, label, eventName, q, cursor or limit)", k)
		}
		if len(v) > 1 {
			return badRequest("%s: given %d times, want once", k, len(v))
		}
	}
	limit := defaultCount
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxCount {
			return badRequest("limit: want an integer from 1 to %d, got %q", maxCount, v)
		}
		limit = n
	}
	f, err := native.SearchOfQuery(q.Get).Filter()
	if err != nil {
		return nativeError(err)
	}
	after, err := parseRunCursor(q.Get("cursor"))
	if err != nil {
		return err
	}
	runs, next, err := h.native.Runs(c.Request().Context(), projectOf(c), f, after, limit)
	if err != nil {
		return nativeError(err)
	}
	if runs == nil {
		runs = []native.RunView{}
	}
	out := map[string]any{"runs": runs}
	if next != nil {
		out["cursor"] = formatRunCursor(next)
	}
	return c.JSON(http.StatusOK, out)
}

func (h *nativeHandlers) getRun(c echo.Context) error {
	return nativeAnswer(h, c, func(ctx context.Context, project string) (any, error) {
		return h.native.Run(ctx, project, c.Param("id"))
	})
}

func (h *nativeHandlers) cancelRun(c echo.Context) error {
	return nativeAnswer(h, c, func(ctx context.Context, project string) (any, error) {
		return h.native.CancelRun(ctx, project, c.Param("id"))
	})
}

// replayRun re-runs a failed run from its failed step. The body may be empty, an empty
// object, or {"cap": {maxCost?, maxTokens?}}: the run's AI cap from now on (validated as
// a definition's cap), so a run stopped by its cap resumes at the AI step that crossed it.
func (h *nativeHandlers) replayRun(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	body, err := readBody(c, 64<<10)
	if err != nil {
		return err
	}
	var cp *flowctl.Cap
	if len(bytes.TrimSpace(body)) > 0 {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			return badRequest("body: want an empty body or a JSON object")
		}
		for name, raw := range fields {
			if name != "cap" {
				return badRequest("%s: unknown field (replay takes only cap)", name)
			}
			ctl, err := flowctl.ParseControls(map[string]json.RawMessage{"cap": raw})
			if err != nil {
				return badRequest("%s", err.Error())
			}
			if ctl.Cap == nil {
				return badRequest("cap: want {maxCost?, maxTokens?}")
			}
			cp = ctl.Cap
		}
	}
	r, err := h.native.ReplayRunCap(c.Request().Context(), projectOf(c), c.Param("id"), cp)
	if err != nil {
		return nativeError(err)
	}
	return c.JSON(http.StatusOK, r)
}

func (h *nativeHandlers) runStats(c echo.Context) error {
	return nativeAnswer(h, c, func(ctx context.Context, project string) (any, error) {
		return h.native.Stats(ctx, project)
	})
}

func (h *nativeHandlers) flowState(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	q := c.QueryParams()
	for k := range q {
		if k != "app" && k != "workflow" {
			return badRequest("%s: unknown parameter (want app or workflow)", k)
		}
	}
	st, err := h.native.FlowState(c.Request().Context(), projectOf(c), q.Get("app"), q.Get("workflow"))
	if err != nil {
		return nativeError(err)
	}
	return c.JSON(http.StatusOK, st)
}

// nativeAnswer runs one native read or action for the request's project and answers its
// result as JSON (the unit's errors mapped by nativeError).
func nativeAnswer(h *nativeHandlers, c echo.Context, do func(ctx context.Context, project string) (any, error)) error {
	if err := h.enabled(); err != nil {
		return err
	}
	v, err := do(c.Request().Context(), projectOf(c))
	if err != nil {
		return nativeError(err)
	}
	return c.JSON(http.StatusOK, v)
}

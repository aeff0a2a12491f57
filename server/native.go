package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/flowctl"
)

// Native is what the native API routes (docs/protocol.md, "Native workflows") need of the
// native unit.
type Native interface {
	ParseApp(app string, body []byte) ([]native.Workflow, error)
	PutApp(ctx context.Context, project, app string, defs []native.Workflow) (*native.AppView, error)
	GetApp(ctx context.Context, project, app string) (*native.AppView, error)
	Apps(ctx context.Context, project string) ([]native.App, error)
	DeleteApp(ctx context.Context, project, app string) error
	Workflows(ctx context.Context, project, app string) ([]native.Workflow, error)
	Workflow(ctx context.Context, project, name string) (*native.Workflow, error)
	ParseEvents(body []byte) ([]native.EventIn, error)
	SendEvents(ctx context.Context, project string, events []native.EventIn) ([]native.EventResult, error)
	Events(ctx context.Context, project, name, cursor string, limit int) ([]native.Event, string, error)
	Event(ctx context.Context, project, id string) (*native.Event, error)
	NativeRuns
}

var _ Native = (*native.Service)(nil)

// nativeHandlers serve apps, workflow definitions and events at the root paths.
type nativeHandlers struct {
	native Native // nil: the native API is not enabled in this server
	cfg    Config
}

func (h *nativeHandlers) register(g *echo.Group) {
	g.PUT("/apps/:app", h.putApp)
	g.GET("/apps", h.listApps)
	g.GET("/apps/:app", h.getApp)
	g.DELETE("/apps/:app", h.deleteApp)
	g.GET("/workflows", h.listWorkflows)
	g.GET("/workflows/:name", h.getWorkflow)
	g.POST("/events", h.sendEvents)
	g.GET("/events", h.listEvents)
	g.GET("/events/:id", h.getEvent)
	h.registerRuns(g)
}

func (h *nativeHandlers) enabled() error {
	if h.native == nil {
		return notFound("the native API is not enabled in this server")
	}
	return nil
}

// workflowView is a definition as the API shows it.
type workflowView struct {
	App         string            `json:"app"`
	Name        string            `json:"name"`
	URL         string            `json:"url"`
	Triggers    []native.Trigger  `json:"triggers"`
	Retries     int               `json:"retries"`
	FlowControl flowctl.Controls  `json:"flowControl"`
	CancelOn    []native.CancelOn `json:"cancelOn,omitempty"`
	CreatedAt   int64             `json:"createdAt"`
	UpdatedAt   int64             `json:"updatedAt"`
}

func toWorkflowViews(defs []native.Workflow) []workflowView {
	out := make([]workflowView, len(defs))
	for i, d := range defs {
		out[i] = workflowView(d)
	}
	return out
}

type appView struct {
	Name      string         `json:"name"`
	CreatedAt int64          `json:"createdAt"`
	UpdatedAt int64          `json:"updatedAt"`
	Workflows []workflowView `json:"workflows"`
}

func toAppView(v *native.AppView) appView {
	return appView{Name: v.App.Name, CreatedAt: v.App.CreatedAt, UpdatedAt: v.App.UpdatedAt, Workflows: toWorkflowViews(v.Workflows)}
}

func (h *nativeHandlers) putApp(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	body, err := readBody(c, h.cfg.MaxBatchBytes)
	if err != nil {
		return err
	}
	app := c.Param("app")
	defs, err := h.native.ParseApp(app, body)
	if err != nil {
		return nativeError(err)
	}
	v, err := h.native.PutApp(c.Request().Context(), projectOf(c), app, defs)
	if err != nil {
		return nativeError(err)
	}
	return c.JSON(http.StatusOK, toAppView(v))
}

func (h *nativeHandlers) getApp(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	v, err := h.native.GetApp(c.Request().Context(), projectOf(c), c.Param("app"))
	if err != nil {
		return nativeError(err)
	}
	return c.JSON(http.StatusOK, toAppView(v))
}

type appSummary struct {
	Name      string   `json:"name"`
	Workflows []string `json:"workflows"`
	CreatedAt int64    `json:"createdAt"`
	UpdatedAt int64    `json:"updatedAt"`
}

func (h *nativeHandlers) listApps(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	apps, err := h.native.Apps(c.Request().Context(), projectOf(c))
	if err != nil {
		return nativeError(err)
	}
	out := make([]appSummary, len(apps))
	for i, a := range apps {
		out[i] = appSummary(a)
		if out[i].Workflows == nil {
			out[i].Workflows = []string{}
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"apps": out})
}

func (h *nativeHandlers) deleteApp(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	if err := h.native.DeleteApp(c.Request().Context(), projectOf(c), c.Param("app")); err != nil {
		return nativeError(err)
	}
	return c.NoContent(http.StatusOK)
}

func (h *nativeHandlers) listWorkflows(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	defs, err := h.native.Workflows(c.Request().Context(), projectOf(c), c.QueryParam("app"))
	if err != nil {
		return nativeError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"workflows": toWorkflowViews(defs)})
}

func (h *nativeHandlers) getWorkflow(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	d, err := h.native.Workflow(c.Request().Context(), projectOf(c), c.Param("name"))
	if err != nil {
		return nativeError(err)
	}
	return c.JSON(http.StatusOK, workflowView(*d))
}

func (h *nativeHandlers) sendEvents(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	body, err := readBody(c, h.cfg.MaxBatchBytes)
	if err != nil {
		return err
	}
	events, err := h.native.ParseEvents(body)
	if err != nil {
		return nativeError(err)
	}
	res, err := h.native.SendEvents(c.Request().Context(), projectOf(c), events)
	if errors.Is(err, native.ErrBusy) {
		c.Response().Header().Set("Retry-After", "1")
	}
	if err != nil {
		return nativeError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"events": res})
}

func (h *nativeHandlers) listEvents(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	q := c.QueryParams()
	limit := defaultCount
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxCount {
			return badRequest("limit: want an integer from 1 to %d, got %q", maxCount, v)
		}
		limit = n
	}
	cursor := q.Get("cursor")
	if cursor != "" && !native.IsEventID(cursor) {
		return badRequest("cursor: %q is not a cursor returned by this API", cursor)
	}
	events, next, err := h.native.Events(c.Request().Context(), projectOf(c), q.Get("name"), cursor, limit)
	if err != nil {
		return nativeError(err)
	}
	if events == nil {
		events = []native.Event{}
	}
	out := map[string]any{"events": events}
	if next != "" {
		out["cursor"] = next
	}
	return c.JSON(http.StatusOK, out)
}

func (h *nativeHandlers) getEvent(c echo.Context) error {
	return nativeAnswer(h, c, func(ctx context.Context, project string) (any, error) {
		return h.native.Event(ctx, project, c.Param("id"))
	})
}

// nativeError maps the native unit's errors to their answers.
func nativeError(err error) error {
	switch {
	case errors.Is(err, native.ErrInvalid):
		return badRequest("%s", strings.TrimPrefix(err.Error(), native.ErrInvalid.Error()+": "))
	case errors.Is(err, native.ErrNotFound):
		return notFound("%s", strings.TrimSuffix(err.Error(), ": "+native.ErrNotFound.Error()))
	case errors.Is(err, native.ErrConflict), errors.Is(err, native.ErrRunEnded):
		return &apiError{status: http.StatusConflict, msg: err.Error()}
	case errors.Is(err, native.ErrLimit):
		return limitError("%v", err)
	case errors.Is(err, native.ErrTooManyRuns):
		return &apiError{status: http.StatusRequestEntityTooLarge, msg: "events: " + strings.TrimPrefix(err.Error(), native.ErrTooManyRuns.Error()+": ")}
	case errors.Is(err, native.ErrBusy):
		return &apiError{status: http.StatusTooManyRequests, msg: "events: " + strings.TrimPrefix(err.Error(), native.ErrBusy.Error()+": ")}
	}
	return err
}

package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// queueHandlers serve named queues.
type queueHandlers struct {
	engine interface {
		UpsertQueue(ctx context.Context, project, name string, parallelism int, paused bool) error
		SetQueuePaused(ctx context.Context, project, name string, paused bool) error
		DeleteQueue(ctx context.Context, project, name string) error
		Queues(ctx context.Context, project, name string) ([]delivery.QueueInfo, error)
	}
}

// maxQueueParallelism caps a queue's parallelism.
const maxQueueParallelism = 10_000

func (h *queueHandlers) register(g *echo.Group) {
	g.POST("/queues", h.upsert)
	g.GET("/queues", h.list)
	g.GET("/queues/:name", h.get)
	g.DELETE("/queues/:name", h.delete)
	g.POST("/queues/:name/pause", h.pause)
	g.POST("/queues/:name/resume", h.resume)
}

// upsertQueueRequest is the body of POST /v2/queues. Unlike the SDK's QueueConfig it
// tells an absent parallelism (default 1) from an explicit 0 (refused).
type upsertQueueRequest struct {
	QueueName   string `json:"queueName"`
	Parallelism *int   `json:"parallelism"`
	Paused      bool   `json:"paused"`
}

func toQueueView(q delivery.QueueInfo) wire.Queue {
	return wire.Queue{Name: q.Name, Parallelism: q.Parallelism, Paused: q.Paused, Lag: q.Lag, CreatedAt: q.CreatedAt, UpdatedAt: q.UpdatedAt}
}

func (h *queueHandlers) upsert(c echo.Context) error {
	c.Request().Body = http.MaxBytesReader(c.Response(), c.Request().Body, 64<<10)
	var req upsertQueueRequest
	if err := c.Bind(&req); err != nil {
		return err
	}
	if err := validQueueName(req.QueueName); err != nil {
		return err
	}
	parallelism := 1
	if req.Parallelism != nil {
		parallelism = *req.Parallelism
	}
	if parallelism < 1 || parallelism > maxQueueParallelism {
		return badRequest("parallelism: must be between 1 and %d", maxQueueParallelism)
	}
	if err := h.engine.UpsertQueue(c.Request().Context(), projectOf(c), req.QueueName, parallelism, req.Paused); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

func (h *queueHandlers) list(c echo.Context) error {
	qs, err := h.engine.Queues(c.Request().Context(), projectOf(c), "")
	if err != nil {
		return err
	}
	out := make([]wire.Queue, len(qs))
	for i, q := range qs {
		out[i] = toQueueView(q)
	}
	return c.JSON(http.StatusOK, out)
}

func (h *queueHandlers) get(c echo.Context) error {
	qs, err := h.engine.Queues(c.Request().Context(), projectOf(c), c.Param("name"))
	if err != nil {
		return queueNotFound(c.Param("name"), err)
	}
	return c.JSON(http.StatusOK, toQueueView(qs[0]))
}

func (h *queueHandlers) delete(c echo.Context) error {
	if err := noQuery(c, "DELETE /v2/queues/{name}"); err != nil {
		return err
	}
	if err := h.engine.DeleteQueue(c.Request().Context(), projectOf(c), c.Param("name")); err != nil {
		return queueNotFound(c.Param("name"), err)
	}
	return c.NoContent(http.StatusOK)
}

func (h *queueHandlers) pause(c echo.Context) error  { return h.setPaused(c, true) }
func (h *queueHandlers) resume(c echo.Context) error { return h.setPaused(c, false) }

func (h *queueHandlers) setPaused(c echo.Context, paused bool) error {
	if err := h.engine.SetQueuePaused(c.Request().Context(), projectOf(c), c.Param("name"), paused); err != nil {
		return queueNotFound(c.Param("name"), err)
	}
	return c.NoContent(http.StatusOK)
}

func queueNotFound(name string, err error) error {
	if errors.Is(err, delivery.ErrNotFound) {
		return notFound("queue %q not found", name)
	}
	return err
}

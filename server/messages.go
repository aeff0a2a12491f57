package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// messageHandlers serve reads and cancellation of pending messages.
type messageHandlers struct {
	engine interface {
		Message(ctx context.Context, project, id string) (*delivery.Message, error)
		Cancel(ctx context.Context, project string, ids []string, keep func(*delivery.Message) bool, limit int) (int, error)
		WaitReason(ctx context.Context, project, messageID string) (reason string, since time.Time, ok bool, err error)
	}
}

func (h *messageHandlers) register(g *echo.Group) {
	g.GET("/messages/:id", h.get)
	g.DELETE("/messages/:id", h.cancel)
	g.DELETE("/messages", h.cancelMany)
}

// maxBulkCancel caps the messages one filter-based cancel removes; a request's count
// lowers it (QStash cancels in batches of count: the SDK sends 100 for { all: true } and
// its documentation loops until nothing is left).
const maxBulkCancel = 10_000

func (h *messageHandlers) get(c echo.Context) error {
	m, err := h.engine.Message(c.Request().Context(), projectOf(c), c.Param("id"))
	if err != nil {
		return messageNotFound(c.Param("id"), err)
	}
	v := toMessageView(m)
	reason, since, ok, err := h.engine.WaitReason(c.Request().Context(), projectOf(c), m.ID)
	if err != nil {
		return err
	}
	if ok {
		v.Waiting = &wire.Waiting{Reason: reason, Since: since.UnixMilli()}
	}
	return c.JSON(http.StatusOK, v)
}

func (h *messageHandlers) cancel(c echo.Context) error {
	if err := noQuery(c, "DELETE /v2/messages/{id}"); err != nil {
		return err
	}
	n, err := h.engine.Cancel(c.Request().Context(), projectOf(c), []string{c.Param("id")}, nil, 1)
	if err != nil {
		return err
	}
	if n == 0 {
		return notFound("message %q not found (it may have been delivered already)", c.Param("id"))
	}
	return c.JSON(http.StatusOK, wire.CancelResult{Cancelled: n})
}

func (h *messageHandlers) cancelMany(c echo.Context) error {
	if err := cancelMessagesParams.check(c); err != nil {
		return err
	}
	lq, err := parseList(c, "messageIds", delivery.PrefixMessage, idAt(delivery.PrefixMessage))
	if err != nil {
		return err
	}
	keep := func(m *delivery.Message) bool {
		var fc string
		if m.FlowControl != nil {
			fc = m.FlowControl.Key
		}
		return lq.f.matchMessage(m.ID, m.URL, m.Queue, m.Labels, m.CallerIP, m.CreatedAt, fc, m.ScheduleID, m.TopicName)
	}
	limit, err := parseCount(c, maxBulkCancel, maxBulkCancel)
	if err != nil {
		return err
	}
	n, err := h.engine.Cancel(c.Request().Context(), projectOf(c), lq.ids, keep, limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.CancelResult{Cancelled: n})
}

func messageNotFound(id string, err error) error {
	if errors.Is(err, delivery.ErrNotFound) {
		return notFound("message %q not found", id)
	}
	return err
}

package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// logHandlers serve message logs. The SDK calls /v2/events, the docs name /v2/logs: both
// are served.
type logHandlers struct {
	engine interface {
		Logs(ctx context.Context, project, cursor string, count int, keep func(*delivery.LogEvent) bool) ([]delivery.LogEvent, string, error)
	}
}

func (h *logHandlers) register(g *echo.Group) {
	g.GET("/events", h.list)
	g.GET("/logs", h.list)
}

func (h *logHandlers) list(c echo.Context) error {
	lq, err := parseList(c, "messageIds", delivery.PrefixLog, idAt(delivery.PrefixLog))
	if err != nil {
		return err
	}
	keep := func(ev *delivery.LogEvent) bool {
		if len(lq.ids) > 0 && !contains(lq.ids, ev.MessageID) {
			return false
		}
		if !lq.f.state.admits(ev.State) {
			return false
		}
		return lq.f.matchMessage(ev.MessageID, ev.URL, ev.Queue, ev.Labels, "", ev.Time, "", ev.ScheduleID, ev.TopicName)
	}
	events, next, err := h.engine.Logs(c.Request().Context(), projectOf(c), lq.cursor, lq.count, keep)
	if err != nil {
		return err
	}
	out := wire.LogsPage{Cursor: next, Events: make([]wire.Log, len(events))}
	for i := range events {
		out.Events[i] = toLogView(&events[i])
	}
	return c.JSON(http.StatusOK, out)
}

package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// dlqHandlers serve the dead-letter queue.
type dlqHandlers struct {
	engine interface {
		DLQ(ctx context.Context, project, cursor string, count int, keep func(*delivery.DLQEntry) bool) ([]delivery.DLQEntry, string, error)
		DeleteDLQ(ctx context.Context, project string, ids []string) (int, error)
		RetryDLQ(ctx context.Context, project string, ids []string) ([]string, error)
	}
	workflow *workflowDLQHandlers // serves GET /v2/dlq?source=workflow
}

func (h *dlqHandlers) register(g *echo.Group) {
	g.GET("/dlq", h.list)
	g.DELETE("/dlq/:id", h.deleteOne)
	g.DELETE("/dlq", h.deleteMany)
	g.POST("/dlq/retry", h.retry)
}

// selection resolves a list or bulk request to one page of dead letters.
func (h *dlqHandlers) selection(c echo.Context) ([]delivery.DLQEntry, string, error) {
	lq, err := parseList(c, "dlqIds", delivery.PrefixDLQ, idAt(delivery.PrefixDLQ))
	if err != nil {
		return nil, "", err
	}
	keep := func(d *delivery.DLQEntry) bool {
		if len(lq.ids) > 0 && !contains(lq.ids, d.DLQID) {
			return false
		}
		if !lq.f.admitsStatus(d.Response.Status) {
			return false
		}
		m := &d.Message
		var fc string
		if m.FlowControl != nil {
			fc = m.FlowControl.Key
		}
		return lq.f.matchMessage(m.ID, m.URL, m.Queue, m.Labels, m.CallerIP, d.FailedAt, fc, m.ScheduleID, m.TopicName)
	}
	return h.engine.DLQ(c.Request().Context(), projectOf(c), lq.cursor, lq.count, keep)
}

func (h *dlqHandlers) list(c echo.Context) error {
	if c.QueryParam("source") == "workflow" {
		return h.workflow.list(c)
	}
	entries, next, err := h.selection(c)
	if err != nil {
		return err
	}
	out := wire.DLQPage{Cursor: next, Messages: make([]wire.DLQMessage, len(entries))}
	for i := range entries {
		out.Messages[i] = toDLQView(&entries[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (h *dlqHandlers) deleteOne(c echo.Context) error {
	if err := noQuery(c, "DELETE /v2/dlq/{id}"); err != nil {
		return err
	}
	n, err := h.engine.DeleteDLQ(c.Request().Context(), projectOf(c), []string{c.Param("id")})
	if err != nil {
		return err
	}
	if n == 0 {
		return notFound("dlq message %q not found", c.Param("id"))
	}
	return c.NoContent(http.StatusOK)
}

func (h *dlqHandlers) deleteMany(c echo.Context) error {
	if err := dlqBulkParams.on("DELETE /v2/dlq").check(c); err != nil {
		return err
	}
	return deleteSelected(c, h.selection, h.engine.DeleteDLQ)
}

// deleteSelected deletes one page of dead letters chosen by selection and answers with
// how many it deleted and where the next page starts.
func deleteSelected(c echo.Context, selection func(echo.Context) ([]delivery.DLQEntry, string, error), del func(ctx context.Context, project string, ids []string) (int, error)) error {
	entries, next, err := selection(c)
	if err != nil {
		return err
	}
	n, err := del(c.Request().Context(), projectOf(c), dlqIDs(entries))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.DeleteResult{Deleted: n, Cursor: next})
}

func (h *dlqHandlers) retry(c echo.Context) error {
	if err := dlqBulkParams.on("POST /v2/dlq/retry").check(c); err != nil {
		return err
	}
	entries, next, err := h.selection(c)
	if err != nil {
		return err
	}
	ids, err := h.engine.RetryDLQ(c.Request().Context(), projectOf(c), dlqIDs(entries))
	if err != nil {
		return err
	}
	out := wire.RetryResult{Cursor: next, Responses: make([]wire.PublishResult, len(ids))}
	for i, id := range ids {
		out.Responses[i] = wire.PublishResult{MessageID: id}
	}
	return c.JSON(http.StatusOK, out)
}

func dlqIDs(entries []delivery.DLQEntry) []string {
	ids := make([]string, len(entries))
	for i := range entries {
		ids[i] = entries[i].DLQID
	}
	return ids
}

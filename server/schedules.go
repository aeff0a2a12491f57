package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery/schedule"
	"github.com/duraton/duraton/sdk/wire"
)

// Schedules is what the schedule routes need of the scheduler.
type Schedules interface {
	Create(ctx context.Context, spec schedule.Spec) (string, error)
	Get(ctx context.Context, project, id string) (*schedule.Schedule, error)
	List(ctx context.Context, project string) ([]schedule.Schedule, error)
	Delete(ctx context.Context, project, id string) error
	SetPaused(ctx context.Context, project, id string, paused bool) error
}

var _ Schedules = (*schedule.Scheduler)(nil)

// scheduleHandlers serve QStash schedules (/v2/schedules).
type scheduleHandlers struct {
	schedules Schedules // nil: schedules are not enabled in this server
	publish   *publishHandlers
}

func (h *scheduleHandlers) register(g *echo.Group) {
	g.POST("/schedules/*", h.create)
	g.GET("/schedules", h.list)
	g.GET("/schedules/:id", h.get)
	g.DELETE("/schedules/:id", h.delete)
	g.PATCH("/schedules/:id/pause", h.pause)
	g.PATCH("/schedules/:id/resume", h.resume)
}

func (h *scheduleHandlers) enabled() error {
	if h.schedules == nil {
		return notFound("schedules are not enabled in this server")
	}
	return nil
}

// create takes the destination like publish does and every publish header, plus
// Upstash-Cron (required), Upstash-Schedule-Id and Upstash-Queue-Name.
func (h *scheduleHandlers) create(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	// A schedule's messages start at hop 0: made by a delivery, it would restart the
	// count at every tick.
	if err := noFanOutFromDelivery(c, "a schedule (a message every tick)", 0); err != nil {
		return err
	}
	r := c.Request()
	cron := strings.TrimSpace(r.Header.Get(wire.HeaderCron))
	if cron == "" {
		return headerError(wire.HeaderCron, "a cron expression is required, e.g. \"*/5 * * * *\" or \"CRON_TZ=Europe/Berlin 0 9 * * 1-5\"")
	}
	if r.Header.Get(wire.HeaderNotBefore) != "" {
		return headerError(wire.HeaderNotBefore, "not allowed on a schedule (use Upstash-Delay for a delay after each tick)")
	}
	queue := r.Header.Get(wire.HeaderQueueName)
	if queue != "" {
		if err := validQueueName(queue); err != nil {
			return prefixError(wire.HeaderQueueName, err)
		}
	}
	body, err := readBody(c, h.publish.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	p := h.publish.parser()
	m, err := p.parse(r.Header, rawDestination(r, "/v2/schedules/"))
	if err != nil {
		return err
	}
	cfg, err := p.config(r.Header, "")
	if err != nil {
		return err
	}
	// A tick is a new message each time: deduplication headers would drop every tick
	// after the first, so they do not apply.
	m.NotBefore, m.DedupID = 0, ""
	m.Project, m.Body, m.Queue, m.CallerIP = projectOf(c), body, queue, c.RealIP()
	id, err := h.schedules.Create(r.Context(), schedule.Spec{ID: r.Header.Get(wire.HeaderScheduleID), Project: projectOf(c), Cron: cron, Template: *m, DelayMs: cfg.DelayMs})
	switch {
	case errors.Is(err, schedule.ErrBadCron):
		return headerError(wire.HeaderCron, "%v", err)
	case errors.Is(err, schedule.ErrBadID):
		return headerError(wire.HeaderScheduleID, "%v", err)
	case errors.Is(err, schedule.ErrLimit):
		return limitError("%v", err)
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"scheduleId": id})
}

func (h *scheduleHandlers) list(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	list, err := h.schedules.List(c.Request().Context(), projectOf(c))
	if err != nil {
		return err
	}
	out := make([]scheduleView, len(list))
	for i := range list {
		out[i] = toScheduleView(&list[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (h *scheduleHandlers) get(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	sc, err := h.schedules.Get(c.Request().Context(), projectOf(c), c.Param("id"))
	if errors.Is(err, schedule.ErrNotFound) {
		return notFound("schedule %q not found", c.Param("id"))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toScheduleView(sc))
}

func (h *scheduleHandlers) delete(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	return h.answer(c, h.schedules.Delete(c.Request().Context(), projectOf(c), c.Param("id")))
}

func (h *scheduleHandlers) pause(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	return h.answer(c, h.schedules.SetPaused(c.Request().Context(), projectOf(c), c.Param("id"), true))
}

func (h *scheduleHandlers) resume(c echo.Context) error {
	if err := h.enabled(); err != nil {
		return err
	}
	return h.answer(c, h.schedules.SetPaused(c.Request().Context(), projectOf(c), c.Param("id"), false))
}

func (h *scheduleHandlers) answer(c echo.Context, err error) error {
	if errors.Is(err, schedule.ErrNotFound) {
		return notFound("schedule %q not found", c.Param("id"))
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// scheduleView is the SDK's Schedule type (@upstash/qstash 2.12.0).
type scheduleView struct {
	ScheduleID           string              `json:"scheduleId"`
	Cron                 string              `json:"cron"`
	CreatedAt            int64               `json:"createdAt"`
	Destination          string              `json:"destination"`
	Method               string              `json:"method"`
	Header               map[string][]string `json:"header,omitempty"`
	Body                 string              `json:"body,omitempty"`
	BodyBase64           string              `json:"bodyBase64,omitempty"`
	Retries              int                 `json:"retries"`
	Delay                int64               `json:"delay,omitempty"` // seconds
	Timeout              int64               `json:"timeout,omitempty"`
	Callback             string              `json:"callback,omitempty"`
	FailureCallback      string              `json:"failureCallback,omitempty"`
	CallerIP             string              `json:"callerIp,omitempty"`
	IsPaused             bool                `json:"isPaused"`
	QueueName            string              `json:"queueName,omitempty"`
	FlowControlKey       string              `json:"flowControlKey,omitempty"`
	Parallelism          int                 `json:"parallelism,omitempty"`
	Rate                 int                 `json:"rate,omitempty"`
	Period               int64               `json:"period,omitempty"` // seconds
	RetryDelayExpression string              `json:"retryDelayExpression,omitempty"`
	Label                string              `json:"label,omitempty"`
	Labels               []string            `json:"labels,omitempty"`
	LastScheduleTime     int64               `json:"lastScheduleTime,omitempty"`
	NextScheduleTime     int64               `json:"nextScheduleTime,omitempty"`
}

func toScheduleView(sc *schedule.Schedule) scheduleView {
	m := &sc.Template
	v := scheduleView{
		ScheduleID: sc.ID, Cron: sc.Cron, CreatedAt: sc.CreatedAt, Destination: m.URL, Method: m.Method,
		Header: redactHeader(m.Header, m.Redact), Retries: m.Retries, Delay: sc.DelayMs / 1000, Timeout: m.TimeoutMs / 1000,
		CallerIP: m.CallerIP, IsPaused: sc.Paused, QueueName: m.Queue, RetryDelayExpression: m.RetryDelay,
		Labels: m.Labels, LastScheduleTime: sc.LastAt, NextScheduleTime: sc.NextAt,
	}
	v.Body, v.BodyBase64 = wire.BodyFields(redactBody(m.Body, m.Redact))
	v.Callback, v.FailureCallback = callbackURLs(m)
	v.FlowControlKey, v.Parallelism, v.Rate, v.Period = flowFields(m)
	if len(m.Labels) > 0 {
		v.Label = m.Labels[0]
	}
	return v
}

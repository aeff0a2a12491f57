package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/server/live"
)

// The live routes: Server-Sent Events of one run (GET /runs/{id}/events) and of a
// project's runs (GET /runs/stream), served by the hub of package live.

// liveStatus is a run's status as the live streams show it (`status`, `end` and `run`
// events): the run view without its steps and keys.
type liveStatus struct {
	RunID     string             `json:"runId"`
	Workflow  string             `json:"workflow"`
	App       string             `json:"app"`
	Status    string             `json:"status"`
	CreatedAt int64              `json:"createdAt"`
	StartedAt int64              `json:"startedAt,omitempty"`
	EndedAt   int64              `json:"endedAt,omitempty"`
	DLQID     string             `json:"dlqId,omitempty"`
	Waiting   *native.RunWaiting `json:"waiting,omitempty"`
}

func toLiveStatus(v *native.RunView) liveStatus {
	return liveStatus{RunID: v.RunID, Workflow: v.Workflow, App: v.App, Status: v.Status, CreatedAt: v.CreatedAt,
		StartedAt: v.StartedAt, EndedAt: v.EndedAt, DLQID: v.DLQID, Waiting: v.Waiting}
}

// RunEnded reports whether a native run status is final.
func RunEnded(status string) bool {
	return status == native.StatusSucceeded || status == native.StatusFailed || status == native.StatusCancelled
}

// LiveRunState reads a native run as a run stream shows it.
func LiveRunState(ctx context.Context, runs NativeRuns, project, id string) (*live.RunState, error) {
	v, err := runs.Run(ctx, project, id)
	if err != nil {
		return nil, err
	}
	st := &live.RunState{Steps: make([]any, len(v.Steps)), Status: toLiveStatus(v), State: v.Status, Ended: RunEnded(v.Status)}
	for i := range v.Steps {
		st.Steps[i] = v.Steps[i]
	}
	return st, nil
}

func (h *nativeHandlers) runEvents(c echo.Context) error {
	if err := h.liveEnabled(); err != nil {
		return err
	}
	project, id := projectOf(c), c.Param("id")
	err := h.cfg.Live.ServeRun(c.Response(), c.Request(), delivery.RunRef{Project: project, ID: id},
		func(ctx context.Context) (*live.RunState, error) { return LiveRunState(ctx, h.native, project, id) })
	return liveError(err)
}

func (h *nativeHandlers) runStream(c echo.Context) error {
	if err := h.liveEnabled(); err != nil {
		return err
	}
	q := c.QueryParams()
	for k := range q {
		if k != "workflow" {
			return badRequest("%s: unknown parameter (want workflow)", k)
		}
	}
	project, workflow := projectOf(c), q.Get("workflow")
	if workflow != "" {
		if _, err := h.native.Workflow(c.Request().Context(), project, workflow); err != nil {
			return nativeError(err)
		}
	}
	err := h.cfg.Live.ServeProject(c.Response(), c.Request(), project, func(ctx context.Context, id string) (any, bool, error) {
		v, err := h.native.Run(ctx, project, id)
		if errors.Is(err, native.ErrNotFound) {
			return nil, false, nil // deleted, or not a native run
		}
		if err != nil {
			return nil, false, err
		}
		if workflow != "" && v.Workflow != workflow {
			return nil, false, nil
		}
		return toLiveStatus(v), true, nil
	})
	return liveError(err)
}

func (h *nativeHandlers) liveEnabled() error {
	if err := h.enabled(); err != nil {
		return err
	}
	if h.cfg.Live == nil {
		return notFound("live streams are not enabled in this server")
	}
	return nil
}

// liveError maps an error from before a stream started.
func liveError(err error) error {
	if errors.Is(err, live.ErrTooManyStreams) {
		return &apiError{status: http.StatusServiceUnavailable, msg: err.Error()}
	}
	if err != nil {
		return nativeError(err)
	}
	return nil
}

package console

import (
	"context"
	"errors"
	"net/http"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/server/live"
)

// streamStep is what a run page's stream says of a step: enough for the page to know it
// changed (it then fetches its live part again).
type streamStep struct {
	Index     int    `json:"index"`
	MessageID string `json:"messageId"`
	CreatedAt int64  `json:"createdAt"`
}

type streamStatus struct {
	State string `json:"state"`
}

// runEvents streams a run's changes to its page (server/live): the page re-renders its
// live part on each event instead of polling.
func (c *Console) runEvents(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Live == nil {
		c.fail(w, r, http.StatusNotFound, "live streams are not enabled")
		return
	}
	project, id := sessionOf(r).project, r.PathValue("id")
	err := c.cfg.Live.ServeRun(w, r, delivery.RunRef{Project: project, ID: id}, func(ctx context.Context) (*live.RunState, error) {
		run, err := c.engine.Run(ctx, project, id)
		if err != nil {
			return nil, err
		}
		st := &live.RunState{Status: streamStatus{State: run.State}, State: run.State, Ended: !run.Live()}
		for i, h := range run.History {
			st.Steps = append(st.Steps, streamStep{Index: i, MessageID: h.MessageID, CreatedAt: h.CreatedAt})
		}
		return st, nil
	})
	switch {
	case errors.Is(err, live.ErrTooManyStreams):
		c.fail(w, r, http.StatusServiceUnavailable, err.Error())
	case err != nil:
		c.failErr(w, r, err)
	}
}

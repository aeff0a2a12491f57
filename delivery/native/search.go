package native

import (
	"context"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/storage"
)

// RunFilter selects runs of GET /runs and of the bulk operations; empty fields select
// everything, and the fields combine with AND.
type RunFilter struct {
	Workflow, App, Status string
	// Label and EventName select runs with that label and runs started by an event of
	// that name.
	Label, EventName string
	// From and To bound the creation time (unix ms, inclusive; 0 leaves a side open).
	From, To int64
	// Event, when set, is a condition over the run's triggering event (its initial
	// payload, {id, name, data, ts, events}): GET /runs' q. It is evaluated only on the
	// runs the other filters leave, at most MaxExamined per page.
	Event func(payload []byte) bool
}

// MaxExamined bounds the runs one page of a search examines after the indexed filters
// (workflow, app, event name, label, time) chose them: the status and the q condition are
// checked on at most this many. A page that reaches it ends early with a cursor.
const MaxExamined = 1000

// Empty reports whether the filter selects every run.
func (f RunFilter) Empty() bool {
	return f.Workflow == "" && f.App == "" && f.Status == "" && f.Label == "" && f.EventName == "" &&
		f.From == 0 && f.To == 0 && f.Event == nil
}

func (f RunFilter) query() delivery.RunQuery {
	return delivery.RunQuery{Workflow: f.Workflow, App: f.App, EventName: f.EventName, Label: f.Label, From: f.From, To: f.To}
}

// keep checks what the indexes do not: that the run is a native one, its stored status
// and the event condition.
func (f RunFilter) keep(r *storage.Run, initial func() []byte) bool {
	wf, _ := nativeOf(r)
	if wf == "" {
		return false
	}
	switch f.Status {
	case "":
	case StatusSucceeded:
		if r.State != storage.RunSuccess {
			return false
		}
	case StatusFailed:
		if r.State != storage.RunFailed {
			return false
		}
	case StatusCancelled:
		if r.State != storage.RunCanceled {
			return false
		}
	default:
		if !r.Live() { // a live status: decided by the run's activity
			return false
		}
	}
	return f.Event == nil || f.Event(initial())
}

// maxRunPages bounds the pages one GET /runs with a live status reads to fill its page.
const maxRunPages = 10

// Runs lists native runs newest first, limit per page, after the cursor (nil: from the
// newest), and returns the next page's cursor (nil at the end). A page may hold fewer
// than limit runs while a cursor is returned (a live status, or MaxExamined runs
// examined): follow it.
func (s *Service) Runs(ctx context.Context, project string, f RunFilter, after *delivery.RunCursor, limit int) ([]RunView, *delivery.RunCursor, error) {
	var out []RunView
	examine := max(limit, MaxExamined)
	for page := 0; page < maxRunPages; page++ {
		runs, next, err := s.engine.SearchRuns(ctx, project, f.query(), after, limit-len(out), examine, f.keep)
		if err != nil {
			return nil, nil, err
		}
		views, err := s.views(ctx, project, runs)
		if err != nil {
			return nil, nil, err
		}
		for _, v := range views {
			if f.Status == "" || v.Status == f.Status {
				out = append(out, v)
			}
		}
		if next == nil || len(out) == limit || f.Event != nil {
			return out, next, nil // a q page examines at most MaxExamined runs
		}
		after = next
	}
	return out, after, nil
}

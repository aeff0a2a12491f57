package native

import (
	"context"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// Bulk operations: POST /runs/cancel and POST /runs/replay act on every run a RunFilter
// selects, newest first. One request handles at most Limit matching runs, reading them
// in pages of bulkPage runs and acting on each page in its own transaction, so a large
// set never makes one giant transaction; when more may match it returns a cursor to go
// on from.

// Bulk bounds.
const (
	// DefaultBulkLimit and MaxBulkLimit bound the matching runs one request handles.
	DefaultBulkLimit = 1000
	MaxBulkLimit     = 10_000
	// bulkPage is the runs one read, and one write transaction, handles.
	bulkPage = 100
	// maxBulkExamined bounds the candidates one request examines (the indexed filters'
	// runs checked for status and q).
	maxBulkExamined = 100 * MaxExamined
)

// BulkRequest is one bulk cancel or replay.
type BulkRequest struct {
	Filter RunFilter
	// After is the cursor of the previous request (nil: from the newest).
	After *delivery.RunCursor
	// Limit bounds the matching runs handled (0: DefaultBulkLimit).
	Limit int
	// DryRun only counts.
	DryRun bool
	// Cap is replay's AI cap for the resumed runs (nil: kept).
	Cap *flowctl.Cap
}

// BulkResult is what a bulk request did: Matched runs the filter selected (for replay,
// failed ones with a dead letter; for cancel, live ones), Done those it acted on (0 in a
// dry run; a run that changed meanwhile is not done), and Cursor when more may match.
type BulkResult struct {
	Matched int                 `json:"matched"`
	Done    int                 `json:"done"`
	Cursor  *delivery.RunCursor `json:"-"`
}

// CancelRuns cancels every live run req selects ({"api": true} on each).
func (s *Service) CancelRuns(ctx context.Context, project string, req BulkRequest) (*BulkResult, error) {
	eligible := func(r *storage.Run) bool { return r.Live() }
	return s.bulk(ctx, project, req, eligible, func(runs []storage.Run) (int, error) {
		ids := make([]string, len(runs))
		for i := range runs {
			ids[i] = runs[i].ID
		}
		done, err := s.engine.CancelRunsFor(ctx, project, ids, delivery.CancelledBy{API: true})
		return len(done), err
	})
}

// ReplayRuns replays every failed run req selects from its failed step, as ReplayRunCap
// does for one.
func (s *Service) ReplayRuns(ctx context.Context, project string, req BulkRequest) (*BulkResult, error) {
	eligible := func(r *storage.Run) bool { return r.State == storage.RunFailed && r.DLQID != "" }
	return s.bulk(ctx, project, req, eligible, func(runs []storage.Run) (int, error) {
		dlqs := make([]string, len(runs))
		for i := range runs {
			dlqs[i] = runs[i].DLQID
		}
		resumed, err := s.engine.ReplayRunsWithCap(ctx, project, dlqs, req.Cap)
		return len(resumed), err
	})
}

// bulk walks the runs req selects that are eligible, page by page, and hands each page
// to act (unless a dry run).
func (s *Service) bulk(ctx context.Context, project string, req BulkRequest, eligible func(*storage.Run) bool, act func([]storage.Run) (int, error)) (*BulkResult, error) {
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultBulkLimit
	}
	f := req.Filter
	keep := func(r *storage.Run, initial func() []byte) bool {
		return eligible(r) && f.keep(r, initial)
	}
	live := f.Status != "" && f.Status != StatusSucceeded && f.Status != StatusFailed && f.Status != StatusCancelled
	res := &BulkResult{}
	after, examined := req.After, 0
	for res.Matched < limit {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var runs []storage.Run
		var next *delivery.RunCursor
		err := s.store.View(func(tx *storage.Tx) error {
			var err error
			runs, next, err = tx.SearchRuns(project, f.query(), after, min(bulkPage, limit-res.Matched), MaxExamined, keep)
			return err
		})
		if err != nil {
			return nil, err
		}
		if live && len(runs) > 0 { // a live status is the run's activity now
			if runs, err = s.withActivity(ctx, project, runs, f.Status); err != nil {
				return nil, err
			}
		}
		res.Matched += len(runs)
		if !req.DryRun && len(runs) > 0 {
			n, err := act(runs)
			if err != nil {
				return nil, err
			}
			res.Done += n
		}
		examined += MaxExamined
		if next == nil {
			return res, nil
		}
		after = next
		if examined >= maxBulkExamined {
			break
		}
	}
	res.Cursor = after
	return res, nil
}

// withActivity keeps the runs whose activity is status.
func (s *Service) withActivity(ctx context.Context, project string, runs []storage.Run, status string) ([]storage.Run, error) {
	ids := make([]string, len(runs))
	for i := range runs {
		ids[i] = runs[i].ID
	}
	acts, err := s.engine.RunActivities(ctx, project, ids)
	if err != nil {
		return nil, err
	}
	out := runs[:0]
	for _, r := range runs {
		if a, ok := acts[r.ID]; ok && a.Activity == status {
			out = append(out, r)
		}
	}
	return out, nil
}

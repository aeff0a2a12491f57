package delivery

import (
	"context"
	"errors"
	"fmt"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// RunCursor is a position in the run listing.
type RunCursor = storage.RunCursor

// RunWithHistory is a run, its recorded history and its deliveries whose steps are not
// recorded (run_pending.go).
type RunWithHistory struct {
	Run
	History []HistoryEntry
	Pending []PendingStep
}

// Run reads a run with its history.
func (e *Engine) Run(ctx context.Context, project, runID string) (*RunWithHistory, error) {
	return view(ctx, e.store, func(tx *storage.Tx) (*RunWithHistory, error) {
		run, err := tx.Run(project, runID)
		if err != nil {
			return nil, err
		}
		h, err := tx.History(project, runID, run.HistoryLen)
		if err != nil {
			return nil, err
		}
		pending, err := pendingStepsTx(tx, project, run)
		if err != nil {
			return nil, err
		}
		return &RunWithHistory{Run: *run, History: h, Pending: pending}, nil
	})
}

// Runs lists runs newest first with their histories; see storage.Tx.ListRuns.
func (e *Engine) Runs(ctx context.Context, project string, after *RunCursor, count int, keep func(*Run) bool) ([]RunWithHistory, *RunCursor, error) {
	return e.readRuns(ctx, project, func(tx *storage.Tx) ([]Run, *RunCursor, error) {
		return tx.ListRuns(project, after, count, keep)
	})
}

// RunQuery selects runs by their indexed fields (storage.RunQuery).
type RunQuery = storage.RunQuery

// SearchRuns lists runs matching q and keep newest first with their histories,
// examining at most examine candidates; see storage.Tx.SearchRuns.
func (e *Engine) SearchRuns(ctx context.Context, project string, q RunQuery, after *RunCursor, count, examine int, keep storage.RunSearchKeep) ([]RunWithHistory, *RunCursor, error) {
	return e.readRuns(ctx, project, func(tx *storage.Tx) ([]Run, *RunCursor, error) {
		return tx.SearchRuns(project, q, after, count, examine, keep)
	})
}

// readRuns reads the runs list selects with their histories and pending steps, in one
// read transaction, within the page byte budget (a page cut short gets a cursor).
func (e *Engine) readRuns(ctx context.Context, project string, list func(tx *storage.Tx) ([]Run, *RunCursor, error)) ([]RunWithHistory, *RunCursor, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	var out []RunWithHistory
	var next *RunCursor
	err := e.store.View(func(tx *storage.Tx) error {
		out, next = nil, nil
		runs, n, err := list(tx)
		if err != nil {
			return err
		}
		next = n
		// The byte budget counts histories, which are most of a run's size.
		size := int64(0)
		for i, r := range runs {
			if i > 0 && size >= int64(e.cfg.MaxPageBytes) {
				last := runs[i-1]
				next = &RunCursor{CreatedAt: last.CreatedAt, RunID: last.ID}
				runs = runs[:i]
				break
			}
			size += r.HistoryBytes
		}
		for _, r := range runs {
			h, err := tx.History(project, r.ID, r.HistoryLen)
			if err != nil {
				return err
			}
			pending, err := pendingStepsTx(tx, project, &r)
			if err != nil {
				return err
			}
			out = append(out, RunWithHistory{Run: r, History: h, Pending: pending})
		}
		return nil
	})
	return out, next, err
}

// CancelRuns cancels live runs by id, or (ids empty) up to limit live runs matching keep.
// It returns how many it cancelled.
func (e *Engine) CancelRuns(ctx context.Context, project string, ids []string, keep func(*Run) bool, limit int) (int, error) {
	if len(ids) == 0 {
		var err error
		ids, err = view(ctx, e.store, func(tx *storage.Tx) ([]string, error) {
			runs, _, err := tx.ListRuns(project, nil, limit, func(r *Run) bool { return r.Live() && keep(r) })
			var ids []string
			for _, r := range runs {
				ids = append(ids, r.ID)
			}
			return ids, err
		})
		if err != nil {
			return 0, err
		}
	}
	n := 0
	for _, id := range ids {
		live, err := e.CancelRun(ctx, project, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		if live {
			n++
		}
	}
	return n, nil
}

// ResumedRun names a run that a DLQ resume or restart made live again.
type ResumedRun struct {
	RunID     string
	CreatedAt int64
}

// ResumeRuns makes failed runs live again from their dead letters. With restart false the
// failed delivery is sent again (same history); with restart true the run starts over from
// its initial payload. The dead letters are removed. Dead letters that are not of a failed
// workflow run are skipped.
func (e *Engine) ResumeRuns(ctx context.Context, project string, dlqIDs []string, restart bool, retries *int) ([]ResumedRun, error) {
	return e.resumeRuns(ctx, project, dlqIDs, restart, retries, nil)
}

// ReplayRunWithCap resumes a failed run from its dead letter as ResumeRuns does, with its
// AI cap replaced by cp (nil: kept) in the same transaction, so the raised cap is durable
// with the resumption.
func (e *Engine) ReplayRunWithCap(ctx context.Context, project, dlqID string, cp *flowctl.Cap) ([]ResumedRun, error) {
	var edit func(*Run)
	if cp != nil {
		c := *cp
		edit = func(r *Run) { r.AICap = &c }
	}
	return e.resumeRuns(ctx, project, []string{dlqID}, false, nil, edit)
}

func (e *Engine) resumeRuns(ctx context.Context, project string, dlqIDs []string, restart bool, retries *int, edit func(*Run)) ([]ResumedRun, error) {
	type result struct {
		resumed []ResumedRun
		fx      effects
	}
	now := e.now()
	res, err := update(ctx, e.store, func(tx *storage.Tx) (result, error) {
		var res result
		for _, dlqID := range dlqIDs {
			d, err := tx.DLQ(project, dlqID)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return res, err
			}
			if d.Message.RunID == "" {
				continue
			}
			run, err := tx.Run(project, d.Message.RunID)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return res, err
			}
			if run.State != RunFailed {
				continue
			}
			if retries != nil {
				run.Retries = *retries
			}
			m := d.Message
			m.Retried, m.DedupID = 0, ""
			prepare(&m, e.ids.New(storage.PrefixMessage, now), now)
			if restart {
				if err := tx.DeleteHistoryFrom(project, run.ID, 1); err != nil {
					return res, err
				}
				if err := tx.DeleteStepKeys(project, run.ID); err != nil {
					return res, err
				}
				h, err := tx.History(project, run.ID, 1)
				if err != nil {
					return res, err
				}
				if len(h) == 0 {
					return res, fmt.Errorf("run %q has no initial payload", run.ID)
				}
				run.HistoryLen, run.HistoryBytes = 1, int64(len(h[0].Body))
				m.HistoryLen, m.CallType, m.URL = 1, CallStep, run.URL
			}
			run.State, run.EndedAt, run.DLQID, run.Error = RunStarted, 0, "", nil
			if edit != nil {
				edit(run)
			}
			if m.CallType == CallToCallback {
				// A workflow call (a budget-stopped AI step) goes to its third party
				// again as it was published, not with the run's workflow headers.
				m.OrderAt = run.OrderAt()
			} else {
				applyRun(&m, run)
			}
			if err := tx.PutRun(project, run); err != nil {
				return res, err
			}
			if err := tx.LinkRunMessage(project, run.ID, m.ID); err != nil {
				return res, err
			}
			if err := putNew(tx, &m, e.createdLog(&m, now)); err != nil {
				return res, err
			}
			if err := tx.DeleteDLQ(project, dlqID); err != nil {
				return res, err
			}
			res.fx.add = append(res.fx.add, storage.DueOf(&m))
			res.resumed = append(res.resumed, ResumedRun{RunID: run.ID, CreatedAt: run.CreatedAt})
		}
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	e.disp.apply(res.fx)
	return res.resumed, nil
}

// RerunFailureCallback publishes the failure callback of a dead-lettered workflow run
// again. It returns the run.
func (e *Engine) RerunFailureCallback(ctx context.Context, project, dlqID string) (*Run, error) {
	type result struct {
		run *Run
		due storage.DueEntry
	}
	now := e.now()
	res, err := update(ctx, e.store, func(tx *storage.Tx) (result, error) {
		d, err := tx.DLQ(project, dlqID)
		if err != nil {
			return result{}, err
		}
		if d.Message.RunID == "" || d.Message.FailureCallback == nil {
			return result{}, fmt.Errorf("%w: dlq message %q has no workflow failure callback", ErrNotFound, dlqID)
		}
		m := &d.Message
		out := Outcome{Response: d.Response}
		cb := e.callbackMessage(m, m.FailureCallback, storage.KindFailureCallback, callbackPayloadFor(m, out, dlqID), now)
		if _, err := e.wf.bindCallback(tx, cb, m, out, dlqID, now); err != nil {
			return result{}, err
		}
		if err := putNew(tx, cb, e.createdLog(cb, now)); err != nil {
			return result{}, err
		}
		run, err := tx.Run(project, m.RunID)
		return result{run: run, due: storage.DueOf(cb)}, err
	})
	if err != nil {
		return nil, err
	}
	e.disp.apply(effects{add: []storage.DueEntry{res.due}})
	return res.run, nil
}

// CancelRunsFor cancels the live runs of ids in one transaction, each marked cancelled
// by by, and returns the ids it cancelled (ended or unknown ones are skipped). Callers
// bound len(ids): bulk operations call it once per page.
func (e *Engine) CancelRunsFor(ctx context.Context, project string, ids []string, by CancelledBy) ([]string, error) {
	type result struct {
		done []string
		fx   effects
	}
	now := e.now()
	res, err := update(ctx, e.store, func(tx *storage.Tx) (result, error) {
		var res result
		for _, id := range ids {
			run, err := tx.Run(project, id)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return res, err
			}
			if !run.Live() {
				continue
			}
			cause := by
			run.CancelledBy = &cause
			fx, err := e.wf.endRunTx(tx, project, run, RunCanceled, "", now)
			if err != nil {
				return res, err
			}
			res.fx.merge(fx)
			res.done = append(res.done, id)
		}
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	e.disp.apply(res.fx)
	e.observeRunsEnded(res.fx)
	return res.done, nil
}

// ReplayRunsWithCap resumes failed runs from their dead letters in one transaction, as
// ReplayRunWithCap does for one.
func (e *Engine) ReplayRunsWithCap(ctx context.Context, project string, dlqIDs []string, cp *flowctl.Cap) ([]ResumedRun, error) {
	var edit func(*Run)
	if cp != nil {
		c := *cp
		edit = func(r *Run) { r.AICap = &c }
	}
	return e.resumeRuns(ctx, project, dlqIDs, false, nil, edit)
}

package delivery

import (
	"errors"
	"fmt"

	"github.com/duraton/duraton/storage"
)

// RunCursor is a position in the run listing.
type RunCursor = storage.RunCursor

// RunWithHistory is a run and its recorded history.
type RunWithHistory struct {
	Run
	History []HistoryEntry
}

// Run reads a run with its history.
func (e *Engine) Run(project, runID string) (*RunWithHistory, error) {
	var out *RunWithHistory
	err := e.store.View(func(tx *storage.Tx) error {
		run, err := tx.Run(project, runID)
		if err != nil {
			return err
		}
		h, err := tx.History(project, runID, run.HistoryLen)
		if err != nil {
			return err
		}
		out = &RunWithHistory{Run: *run, History: h}
		return nil
	})
	return out, err
}

// Runs lists runs newest first with their histories; see storage.Tx.ListRuns.
func (e *Engine) Runs(project string, after *RunCursor, count int, keep func(*Run) bool) ([]RunWithHistory, *RunCursor, error) {
	var out []RunWithHistory
	var next *RunCursor
	err := e.store.View(func(tx *storage.Tx) error {
		runs, n, err := tx.ListRuns(project, after, count, keep)
		if err != nil {
			return err
		}
		next = n
		for _, r := range runs {
			h, err := tx.History(project, r.ID, r.HistoryLen)
			if err != nil {
				return err
			}
			out = append(out, RunWithHistory{Run: r, History: h})
		}
		return nil
	})
	return out, next, err
}

// CancelRuns cancels live runs by id, or (ids empty) up to limit live runs matching keep.
// It returns how many it cancelled.
func (e *Engine) CancelRuns(project string, ids []string, keep func(*Run) bool, limit int) (int, error) {
	if len(ids) == 0 {
		if err := e.store.View(func(tx *storage.Tx) error {
			runs, _, err := tx.ListRuns(project, nil, limit, func(r *Run) bool { return r.Live() && keep(r) })
			for _, r := range runs {
				ids = append(ids, r.ID)
			}
			return err
		}); err != nil {
			return 0, err
		}
	}
	n := 0
	for _, id := range ids {
		live, err := e.CancelRun(project, id)
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
func (e *Engine) ResumeRuns(project string, dlqIDs []string, restart bool, retries *int) ([]ResumedRun, error) {
	now := e.now()
	type job struct {
		dlqID string
		msgID string
		log   string
	}
	jobs := make([]job, len(dlqIDs))
	for i, id := range dlqIDs {
		jobs[i] = job{dlqID: id, msgID: e.ids.New(storage.PrefixMessage, now), log: e.ids.New(storage.PrefixLog, now)}
	}
	var out []ResumedRun
	var dues []storage.DueEntry
	err := e.store.Update(func(tx *storage.Tx) error {
		out, dues = out[:0], dues[:0]
		for _, j := range jobs {
			d, err := tx.DLQ(project, j.dlqID)
			if err != nil || d.Message.RunID == "" {
				continue
			}
			run, err := tx.Run(project, d.Message.RunID)
			if err != nil || run.State != RunFailed {
				continue
			}
			if retries != nil {
				run.Retries = *retries
			}
			m := d.Message
			m.Retried, m.DedupID = 0, ""
			prepare(&m, j.msgID, now)
			if restart {
				if err := tx.DeleteHistoryFrom(project, run.ID, 1); err != nil {
					return err
				}
				if err := tx.DeleteStepKeys(project, run.ID); err != nil {
					return err
				}
				h, err := tx.History(project, run.ID, 1)
				if err != nil || len(h) == 0 {
					return fmt.Errorf("run %q has no initial payload", run.ID)
				}
				run.HistoryLen, run.HistoryBytes = 1, int64(len(h[0].Body))
				m.HistoryLen, m.CallType, m.URL = 1, CallStep, run.URL
			}
			run.State, run.EndedAt, run.DLQID = RunStarted, 0, ""
			applyRun(&m, run)
			if err := tx.PutRun(project, run); err != nil {
				return err
			}
			if err := tx.LinkRunMessage(project, run.ID, m.ID); err != nil {
				return err
			}
			log := &storage.LogEvent{ID: j.log, Time: now.UnixMilli(), State: storage.StateCreated, MessageID: m.ID, URL: m.URL, Labels: m.Labels}
			if err := putNew(tx, &m, log); err != nil {
				return err
			}
			if err := tx.DeleteDLQ(project, j.dlqID); err != nil {
				return err
			}
			dues = append(dues, storage.DueOf(&m))
			out = append(out, ResumedRun{RunID: run.ID, CreatedAt: run.CreatedAt})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.disp.add(dues...)
	return out, nil
}

// RerunFailureCallback publishes the failure callback of a dead-lettered workflow run
// again. It returns the run.
func (e *Engine) RerunFailureCallback(project, dlqID string) (*Run, error) {
	now := e.now()
	id := e.ids.New(storage.PrefixMessage, now)
	logID := e.ids.New(storage.PrefixLog, now)
	var run *Run
	var due *storage.DueEntry
	err := e.store.Update(func(tx *storage.Tx) error {
		d, err := tx.DLQ(project, dlqID)
		if err != nil {
			return err
		}
		if d.Message.RunID == "" || d.Message.FailureCallback == nil {
			return fmt.Errorf("%w: dlq message %q has no workflow failure callback", ErrNotFound, dlqID)
		}
		m := &d.Message
		out := Outcome{Response: d.Response}
		p := callbackPayloadFor(m, out, dlqID)
		workflowFailureFields(&p, tx, m)
		cb := e.callbackMessage(m, m.FailureCallback, storage.KindFailureCallback, p, now)
		cb.ID = id
		if _, err := e.workflowCallbackTx(tx, cb, m, now); err != nil {
			return err
		}
		log := &storage.LogEvent{ID: logID, Time: now.UnixMilli(), State: storage.StateCreated, MessageID: cb.ID, URL: cb.URL}
		if err := putNew(tx, cb, log); err != nil {
			return err
		}
		run, err = tx.Run(project, m.RunID)
		dd := storage.DueOf(cb)
		due = &dd
		return err
	})
	if err != nil {
		return nil, err
	}
	e.disp.add(*due)
	return run, nil
}

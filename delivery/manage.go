package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/delivery/internal/sched"
	"github.com/duraton/duraton/storage"
)

// Message reads a pending message of a project.
func (e *Engine) Message(ctx context.Context, project, id string) (*Message, error) {
	return view(ctx, e.store, func(tx *storage.Tx) (*Message, error) { return tx.Message(project, id) })
}

// Cancel removes pending messages of a project: those named by ids, or (ids empty) up to
// limit of those matching keep, oldest first. An attempt already in flight finishes, but
// its outcome is not recorded. It returns how many messages were cancelled.
func (e *Engine) Cancel(ctx context.Context, project string, ids []string, keep func(*Message) bool, limit int) (int, error) {
	now := e.now()
	victims, err := view(ctx, e.store, func(tx *storage.Tx) ([]*Message, error) {
		var victims []*Message
		if len(ids) > 0 {
			for _, id := range ids {
				m, err := tx.Message(project, id)
				if errors.Is(err, storage.ErrNotFound) {
					continue
				}
				if err != nil {
					return nil, err
				}
				victims = append(victims, m)
			}
			return victims, nil
		}
		err := tx.ForEachMessage(project, func(m *Message) bool {
			if keep(m) {
				victims = append(victims, m)
			}
			return len(victims) < limit
		})
		return victims, err
	})
	if err != nil {
		return 0, err
	}
	type result struct {
		cancelled int
		fx        effects
	}
	res, err := update(ctx, e.store, func(tx *storage.Tx) (result, error) {
		var res result
		for _, m := range victims {
			cur, err := tx.Message(project, m.ID)
			if errors.Is(err, storage.ErrNotFound) {
				continue // delivered or cancelled meanwhile
			}
			if err != nil {
				return res, err
			}
			due := storage.DueOf(cur)
			if err := tx.DeleteDue(due); err != nil {
				return res, err
			}
			if err := tx.DeleteMessage(project, m.ID); err != nil {
				return res, err
			}
			ev := stampLog(e.ids, now, storage.LogEvent{State: storage.StateCancelled,
				MessageID: cur.ID, URL: cur.URL, Queue: cur.Queue, Labels: cur.Labels, Retried: cur.Retried})
			if err := tx.AppendLog(project, ev); err != nil {
				return res, err
			}
			res.fx.forget = append(res.fx.forget, due)
			res.cancelled++
		}
		return res, nil
	})
	if err != nil {
		return 0, err
	}
	e.disp.apply(res.fx)
	if h := e.cfg.Hooks.Recorded; h != nil {
		for _, d := range res.fx.forget {
			h(project, d.MessageID, storage.StateCancelled)
		}
	}
	return res.cancelled, nil
}

// Logs lists a project's log events newest first; see storage.Tx.ListLogs.
func (e *Engine) Logs(ctx context.Context, project, cursor string, count int, keep func(*LogEvent) bool) (events []LogEvent, next string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	err = e.store.View(func(tx *storage.Tx) error {
		events, next, err = tx.ListLogs(project, cursor, count, e.cfg.MaxPageBytes, keep)
		return err
	})
	return events, next, err
}

// DLQ lists a project's dead letters newest first; see storage.Tx.ListDLQ.
func (e *Engine) DLQ(ctx context.Context, project, cursor string, count int, keep func(*DLQEntry) bool) (entries []DLQEntry, next string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	err = e.store.View(func(tx *storage.Tx) error {
		entries, next, err = tx.ListDLQ(project, cursor, count, e.cfg.MaxPageBytes, keep)
		return err
	})
	return entries, next, err
}

// WorkflowDLQ lists a project's workflow dead letters (those of a run) newest first;
// keep decides on each with its run, read in the same transaction. (A keep that read the
// run itself would open a read transaction inside another: bbolt deadlocks when a
// commit waits to grow the file between the two.) A dead letter whose run is gone is
// left out; any other failure to read a run fails the listing. So is the dead letter of
// a run's failure callback: QStash lists the run's own entry, whose failureCallbackInfo
// says the callback failed and whose callback can be re-run (/v2/dlq still lists it).
func (e *Engine) WorkflowDLQ(ctx context.Context, project, cursor string, count int, keep func(*DLQEntry, *Run) bool) (entries []DLQEntry, next string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	err = e.store.View(func(tx *storage.Tx) error {
		var readErr error
		entries, next, err = tx.ListDLQ(project, cursor, count, e.cfg.MaxPageBytes, func(d *DLQEntry) bool {
			if d.Message.RunID == "" || d.Message.Kind == storage.KindFailureCallback || readErr != nil {
				return false
			}
			run, err := tx.Run(project, d.Message.RunID)
			if errors.Is(err, storage.ErrNotFound) {
				return false
			}
			if err != nil {
				readErr = err
				return false
			}
			return keep(d, run)
		})
		if readErr != nil {
			return readErr
		}
		return err
	})
	return entries, next, err
}

// DeleteDLQ removes dead letters by id and returns how many existed.
func (e *Engine) DeleteDLQ(ctx context.Context, project string, ids []string) (int, error) {
	return update(ctx, e.store, func(tx *storage.Tx) (int, error) {
		deleted := 0
		for _, id := range ids {
			err := tx.DeleteDLQ(project, id)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return 0, err
			}
			deleted++
		}
		return deleted, nil
	})
}

// RetryDLQ publishes each named dead letter again as a new message with a fresh retry
// budget, and removes it from the DLQ in the same transaction. It returns the new message
// ids in the order of ids; unknown ids are skipped.
func (e *Engine) RetryDLQ(ctx context.Context, project string, ids []string) ([]string, error) {
	now := e.now()
	type result struct {
		ids []string
		fx  effects
	}
	res, err := update(ctx, e.store, func(tx *storage.Tx) (result, error) {
		var res result
		for _, id := range ids {
			d, err := tx.DLQ(project, id)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return res, err
			}
			m := d.Message
			m.ID = e.ids.New(storage.PrefixMessage, now)
			m.CreatedAt, m.NotBefore, m.DueAt = now.UnixMilli(), now.UnixMilli(), now.UnixNano()
			m.State, m.Retried, m.DedupID = storage.StateCreated, 0, ""
			if err := tx.DeleteDLQ(project, d.DLQID); err != nil {
				return res, err
			}
			if err := putNew(tx, &m, e.createdLog(&m, now)); err != nil {
				return res, err
			}
			res.ids = append(res.ids, m.ID)
			res.fx.add = append(res.fx.add, storage.DueOf(&m))
		}
		return res, nil
	})
	if err != nil {
		return nil, err
	}
	e.disp.apply(res.fx)
	return res.ids, nil
}

// UpsertQueue creates or updates a queue.
func (e *Engine) UpsertQueue(ctx context.Context, project string, name string, parallelism int, paused bool) error {
	now := e.now().UnixMilli()
	return e.changeQueue(ctx, project, name, func(tx *storage.Tx) (*storage.Queue, error) {
		q := &storage.Queue{Name: name, Parallelism: parallelism, Paused: paused, CreatedAt: now, UpdatedAt: now}
		cur, err := tx.Queue(project, name)
		switch {
		case err == nil:
			q.CreatedAt = cur.CreatedAt
		case !errors.Is(err, storage.ErrNotFound):
			return nil, err
		default:
			if n := tx.QueueCount(project); n >= e.cfg.MaxQueues {
				return nil, fmt.Errorf("%w: the project has %d queues, the limit is %d", ErrQueueLimit, n, e.cfg.MaxQueues)
			}
		}
		return q, tx.PutQueue(project, q)
	})
}

// SetQueuePaused pauses or resumes a queue.
func (e *Engine) SetQueuePaused(ctx context.Context, project, name string, paused bool) error {
	now := e.now().UnixMilli()
	return e.changeQueue(ctx, project, name, func(tx *storage.Tx) (*storage.Queue, error) {
		cur, err := tx.Queue(project, name)
		if err != nil {
			return nil, err
		}
		updated := *cur
		updated.Paused, updated.UpdatedAt = paused, now
		return &updated, tx.PutQueue(project, &updated)
	})
}

// DeleteQueue removes a queue. Its pending messages stay and are delivered without the
// queue's limits.
func (e *Engine) DeleteQueue(ctx context.Context, project, name string) error {
	return e.changeQueue(ctx, project, name, func(tx *storage.Tx) (*storage.Queue, error) {
		return nil, tx.DeleteQueue(project, name)
	})
}

// changeQueue stores a queue change and gives the scheduler the queue's new settings
// (nil: deleted). queueMu keeps the scheduler's settings in the order of the commits.
func (e *Engine) changeQueue(ctx context.Context, project, name string, change func(tx *storage.Tx) (*storage.Queue, error)) error {
	e.queueMu.Lock()
	defer e.queueMu.Unlock()
	q, err := update(ctx, e.store, change)
	if err != nil {
		return err
	}
	e.disp.with(func(s *sched.Scheduler) []sched.Start {
		s.ConfigureQueue(project, name, queueSettings(q))
		return nil
	})
	return nil
}

func queueSettings(q *storage.Queue) *sched.QueueSettings {
	if q == nil {
		return nil
	}
	return &sched.QueueSettings{Parallelism: q.Parallelism, Paused: q.Paused}
}

// QueueInfo is a queue with its current lag (messages parked or in flight).
type QueueInfo struct {
	Queue
	Lag int
}

// Queues lists a project's queues, or just the named one when name is not empty.
func (e *Engine) Queues(ctx context.Context, project, name string) ([]QueueInfo, error) {
	qs, err := view(ctx, e.store, func(tx *storage.Tx) ([]storage.Queue, error) {
		if name != "" {
			q, err := tx.Queue(project, name)
			if err != nil {
				return nil, err
			}
			return []storage.Queue{*q}, nil
		}
		return tx.Queues(project)
	})
	if err != nil {
		return nil, err
	}
	out := make([]QueueInfo, len(qs))
	e.disp.locked(func(s *sched.Scheduler) {
		for i, q := range qs {
			out[i] = QueueInfo{Queue: q, Lag: s.QueueLag(project, q.Name)}
		}
	})
	return out, nil
}

// sweepLoop removes expired logs, dead letters, deduplication records, native events and
// expired gate states every
// SweepInterval, in small transactions so it never holds the writer for long.
func (e *Engine) sweepLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.disp.stopped:
			return
		case <-t.C:
			if err := e.sweep(ctx); err != nil {
				e.log.Error("retention sweep", "err", err)
			}
		}
	}
}

const (
	sweepBatch = 1000
	// runSweepBatch is smaller: each run goes with its whole history.
	runSweepBatch = 100
)

// sweepStep removes up to its batch of one kind of record of a project in one
// transaction and says how many it removed (a full batch: more may be left).
type sweepStep struct {
	what  string
	batch int
	fn    func(tx *storage.Tx, project string) (int, error)
}

// sweep runs every step on every project, each in small transactions until it finds
// less than a batch. Each step reaches only what it removes (ids in time order, or an
// index by end time or expiry), so nothing that is kept can stop it. A failing step
// does not stop the others: the errors are returned together, each naming its project
// and step.
func (e *Engine) sweep(ctx context.Context) error {
	now := e.now()
	projects, err := ListProjects(ctx, e.store)
	if err != nil {
		return err
	}
	logCut := storage.IDAt(storage.PrefixLog, now.Add(-e.cfg.LogRetention))
	dlqCut := storage.IDAt(storage.PrefixDLQ, now.Add(-e.cfg.DLQRetention))
	runCut := now.Add(-e.cfg.RunRetention).UnixMilli()
	steps := []sweepStep{
		{"logs", sweepBatch, func(tx *storage.Tx, p string) (int, error) { return tx.DeleteLogsBefore(p, logCut, sweepBatch) }},
		{"dead letters", sweepBatch, func(tx *storage.Tx, p string) (int, error) { return tx.DeleteDLQBefore(p, dlqCut, sweepBatch) }},
		{"deduplication records", sweepBatch, func(tx *storage.Tx, p string) (int, error) {
			return tx.DeleteExpiredDedup(p, now.UnixMilli(), sweepBatch)
		}},
		{"ended runs", runSweepBatch, func(tx *storage.Tx, p string) (int, error) {
			return tx.DeleteRunsEndedBefore(p, runCut, runSweepBatch)
		}},
		{"run events", sweepBatch, func(tx *storage.Tx, p string) (int, error) { return e.sweepRunEventsTx(tx, p, now, sweepBatch) }},
		{"native events and gates", sweepBatch, func(tx *storage.Tx, p string) (int, error) {
			return sweepNativeTx(tx, p, now, e.cfg.LogRetention, sweepBatch) // native_tx.go
		}},
	}
	var errs []error
	for _, p := range projects {
		for _, st := range steps {
			for {
				if err := ctx.Err(); err != nil {
					return errors.Join(append(errs, err)...)
				}
				n, err := update(ctx, e.store, func(tx *storage.Tx) (int, error) { return st.fn(tx, p.ID) })
				if err != nil {
					errs = append(errs, fmt.Errorf("project %s: %s: %w", p.ID, st.what, err))
					break
				}
				if n < st.batch {
					break
				}
			}
		}
	}
	return errors.Join(errs...)
}

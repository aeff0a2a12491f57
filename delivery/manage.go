package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/storage"
)

// Message reads a pending message of a project.
func (e *Engine) Message(project, id string) (*Message, error) {
	var m *Message
	err := e.store.View(func(tx *storage.Tx) error {
		var err error
		m, err = tx.Message(project, id)
		return err
	})
	return m, err
}

// Cancel removes pending messages of a project: those named by ids, or (ids empty) up to
// limit of those matching keep, oldest first. An attempt already in flight finishes, but
// its outcome is not recorded. It returns how many messages were cancelled.
func (e *Engine) Cancel(project string, ids []string, keep func(*Message) bool, limit int) (int, error) {
	now := e.now()
	var victims []*Message
	if err := e.store.View(func(tx *storage.Tx) error {
		if len(ids) > 0 {
			for _, id := range ids {
				if m, err := tx.Message(project, id); err == nil {
					victims = append(victims, m)
				}
			}
			return nil
		}
		return tx.ForEachMessage(project, func(m *Message) bool {
			if keep(m) {
				victims = append(victims, m)
			}
			return len(victims) < limit
		})
	}); err != nil {
		return 0, err
	}
	logs := make([]*storage.LogEvent, len(victims))
	for i, m := range victims {
		logs[i] = &storage.LogEvent{ID: e.ids.New(storage.PrefixLog, now), Time: now.UnixMilli(), State: storage.StateCancelled, MessageID: m.ID, URL: m.URL, Queue: m.Queue, Labels: m.Labels, Retried: m.Retried}
	}
	cancelled := 0
	err := e.store.Update(func(tx *storage.Tx) error {
		cancelled = 0
		for i, m := range victims {
			cur, err := tx.Message(project, m.ID)
			if errors.Is(err, storage.ErrNotFound) {
				continue // delivered or cancelled meanwhile
			}
			if err != nil {
				return err
			}
			if err := tx.DeleteDue(storage.DueOf(cur)); err != nil {
				return err
			}
			if err := tx.DeleteMessage(project, m.ID); err != nil {
				return err
			}
			if err := tx.AppendLog(project, logs[i]); err != nil {
				return err
			}
			cancelled++
		}
		return nil
	})
	if err == nil {
		for _, m := range victims {
			if m.Queue != "" {
				e.disp.forget(project, m.Queue, m.ID)
			}
			e.disp.forgetWaiting(storage.DueOf(m))
		}
	}
	return cancelled, err
}

// Logs lists a project's log events newest first; see storage.Tx.ListLogs.
func (e *Engine) Logs(project, cursor string, count int, keep func(*LogEvent) bool) (events []LogEvent, next string, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		events, next, err = tx.ListLogs(project, cursor, count, keep)
		return err
	})
	return events, next, err
}

// DLQ lists a project's dead letters newest first; see storage.Tx.ListDLQ.
func (e *Engine) DLQ(project, cursor string, count int, keep func(*DLQEntry) bool) (entries []DLQEntry, next string, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		entries, next, err = tx.ListDLQ(project, cursor, count, keep)
		return err
	})
	return entries, next, err
}

// DeleteDLQ removes dead letters by id and returns how many existed.
func (e *Engine) DeleteDLQ(project string, ids []string) (int, error) {
	deleted := 0
	err := e.store.Update(func(tx *storage.Tx) error {
		deleted = 0
		for _, id := range ids {
			err := tx.DeleteDLQ(project, id)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			deleted++
		}
		return nil
	})
	return deleted, err
}

// RetryDLQ publishes each named dead letter again as a new message with a fresh retry
// budget, and removes it from the DLQ in the same transaction. It returns the new message
// ids in the order of ids; unknown ids are skipped.
func (e *Engine) RetryDLQ(project string, ids []string) ([]string, error) {
	now := e.now()
	var entries []*DLQEntry
	if err := e.store.View(func(tx *storage.Tx) error {
		for _, id := range ids {
			if d, err := tx.DLQ(project, id); err == nil {
				entries = append(entries, d)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	msgs := make([]*Message, len(entries))
	logs := make([]*storage.LogEvent, len(entries))
	for i, d := range entries {
		m := d.Message
		m.ID = e.ids.New(storage.PrefixMessage, now)
		m.CreatedAt, m.NotBefore, m.DueAt = now.UnixMilli(), now.UnixMilli(), now.UnixNano()
		m.State, m.Retried, m.DedupID = storage.StateCreated, 0, ""
		msgs[i] = &m
		logs[i] = e.createdLog(&m, now)
	}
	var out []string
	err := e.store.Update(func(tx *storage.Tx) error {
		out = out[:0]
		for i, d := range entries {
			if err := tx.DeleteDLQ(project, d.DLQID); errors.Is(err, storage.ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			if err := putNew(tx, msgs[i], logs[i]); err != nil {
				return err
			}
			out = append(out, msgs[i].ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	due := make([]storage.DueEntry, 0, len(out))
	for _, m := range msgs {
		due = append(due, storage.DueOf(m))
	}
	e.disp.add(due...)
	return out, nil
}

// UpsertQueue creates or updates a queue.
func (e *Engine) UpsertQueue(project string, name string, parallelism int, paused bool) error {
	now := e.now().UnixMilli()
	var q storage.Queue
	err := e.store.Update(func(tx *storage.Tx) error {
		q = storage.Queue{Name: name, Parallelism: parallelism, Paused: paused, CreatedAt: now, UpdatedAt: now}
		if cur, err := tx.Queue(project, name); err == nil {
			q.CreatedAt = cur.CreatedAt
		} else if n := tx.QueueCount(project); n >= e.cfg.MaxQueues {
			return fmt.Errorf("%w: the project has %d queues, the limit is %d", ErrQueueLimit, n, e.cfg.MaxQueues)
		}
		return tx.PutQueue(project, &q)
	})
	if err == nil {
		e.disp.configureQueue(project, name, &q)
	}
	return err
}

// SetQueuePaused pauses or resumes a queue.
func (e *Engine) SetQueuePaused(project, name string, paused bool) error {
	now := e.now().UnixMilli()
	var q *storage.Queue
	err := e.store.Update(func(tx *storage.Tx) error {
		cur, err := tx.Queue(project, name)
		if err != nil {
			return err
		}
		updated := *cur
		updated.Paused, updated.UpdatedAt = paused, now
		q = &updated
		return tx.PutQueue(project, &updated)
	})
	if err == nil {
		e.disp.configureQueue(project, name, q)
	}
	return err
}

// DeleteQueue removes a queue. Its pending messages stay and are delivered without the
// queue's limits.
func (e *Engine) DeleteQueue(project, name string) error {
	err := e.store.Update(func(tx *storage.Tx) error { return tx.DeleteQueue(project, name) })
	if err == nil {
		e.disp.configureQueue(project, name, nil)
	}
	return err
}

// QueueInfo is a queue with its current lag (messages parked or in flight).
type QueueInfo struct {
	Queue
	Lag int
}

// Queues lists a project's queues, or just the named one when name is not empty.
func (e *Engine) Queues(project, name string) ([]QueueInfo, error) {
	var qs []storage.Queue
	err := e.store.View(func(tx *storage.Tx) error {
		if name != "" {
			q, err := tx.Queue(project, name)
			if err != nil {
				return err
			}
			qs = []storage.Queue{*q}
			return nil
		}
		var err error
		qs, err = tx.Queues(project)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]QueueInfo, len(qs))
	for i, q := range qs {
		out[i] = QueueInfo{Queue: q, Lag: e.disp.queueLag(project, q.Name)}
	}
	return out, nil
}

// sweepLoop removes expired logs, dead letters and deduplication records every
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
			if err := e.sweep(); err != nil {
				e.log.Error("retention sweep", "err", err)
			}
		}
	}
}

const sweepBatch = 1000

// deleteEndedRuns removes runs that ended before cutoffMs (they were created earlier
// still), with their histories. Live runs are kept however old.
func deleteEndedRuns(tx *storage.Tx, project string, cutoffMs int64, limit int) (int, error) {
	runs, err := tx.OldRuns(project, cutoffMs, limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range runs {
		if r := &runs[i]; !r.Live() && r.EndedAt < cutoffMs {
			if err := tx.DeleteRun(project, r); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

func (e *Engine) sweep() error {
	now := e.now()
	var projects []storage.Project
	if err := e.store.View(func(tx *storage.Tx) error {
		var err error
		projects, err = tx.Projects()
		return err
	}); err != nil {
		return err
	}
	logCut := storage.IDAt(storage.PrefixLog, now.Add(-e.cfg.LogRetention))
	dlqCut := storage.IDAt(storage.PrefixDLQ, now.Add(-e.cfg.DLQRetention))
	for _, p := range projects {
		for {
			n := 0
			err := e.store.Update(func(tx *storage.Tx) error {
				a, err := tx.DeleteLogsBefore(p.ID, logCut, sweepBatch)
				if err != nil {
					return err
				}
				b, err := tx.DeleteDLQBefore(p.ID, dlqCut, sweepBatch)
				if err != nil {
					return err
				}
				c, err := tx.DeleteExpiredDedup(p.ID, now.UnixMilli(), sweepBatch)
				if err != nil {
					return err
				}
				d, err := deleteEndedRuns(tx, p.ID, now.Add(-e.cfg.RunRetention).UnixMilli(), sweepBatch)
				n = a + b + c + d
				return err
			})
			if err != nil {
				return err
			}
			if n < sweepBatch {
				break
			}
		}
	}
	return nil
}

package delivery

import (
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/storage"
)

// ErrQueueNotFound is returned when a queue operation names a queue the project does not have.
var ErrQueueNotFound = fmt.Errorf("queue %w", storage.ErrNotFound)

// DefaultQueueParallelism is the parallelism of a queue created by enqueueing to it, as
// in QStash.
const DefaultQueueParallelism = 1

// PublishResult is the answer for one published message.
type PublishResult struct {
	MessageID    string
	URL          string
	Deduplicated bool
}

// Publish stores messages atomically and schedules them. A message for a queue the
// project does not have creates it with DefaultQueueParallelism. It returns once the messages are
// durable. The caller fills the request fields (Project, URL, Method, Header, Body, Queue,
// Labels, CallerIP, NotBefore in unix ms or 0 for now, Retries, RetryDelay, TimeoutMs,
// DedupID, FlowControl, Callback, FailureCallback); Publish assigns ID, Kind, CreatedAt,
// DueAt and State. A message whose DedupID was seen within DedupWindow is not stored: its
// result names the original message and is marked Deduplicated.
func (e *Engine) Publish(msgs []*Message) ([]PublishResult, error) {
	now := e.now()
	logs := make([]*storage.LogEvent, len(msgs))
	for i, m := range msgs {
		m.ID = e.ids.New(storage.PrefixMessage, now)
		m.Kind = storage.KindMessage
		m.CreatedAt = now.UnixMilli()
		m.State = storage.StateCreated
		due := now
		if m.NotBefore > now.UnixMilli() {
			due = time.UnixMilli(m.NotBefore)
		} else {
			m.NotBefore = now.UnixMilli()
		}
		m.DueAt = due.UnixNano()
		logs[i] = e.createdLog(m, now)
	}
	results := make([]PublishResult, len(msgs))
	expires := now.Add(e.cfg.DedupWindow).UnixMilli()
	err := e.store.Update(func(tx *storage.Tx) error {
		for i, m := range msgs {
			results[i] = PublishResult{MessageID: m.ID, URL: m.URL}
			if m.Queue != "" {
				if _, err := tx.Queue(m.Project, m.Queue); errors.Is(err, storage.ErrNotFound) {
					// Enqueueing to a new queue creates it, as QStash does.
					q := &storage.Queue{Name: m.Queue, Parallelism: DefaultQueueParallelism, CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli()}
					if err := tx.PutQueue(m.Project, q); err != nil {
						return err
					}
				} else if err != nil {
					return err
				}
			}
			if m.DedupID != "" {
				rec, err := tx.Dedup(m.Project, m.DedupID)
				if err == nil && rec.ExpiresAt > now.UnixMilli() {
					results[i] = PublishResult{MessageID: rec.MessageID, URL: m.URL, Deduplicated: true}
					continue
				}
				if err := tx.PutDedup(m.Project, m.DedupID, &storage.DedupRecord{MessageID: m.ID, ExpiresAt: expires}); err != nil {
					return err
				}
			}
			if err := putNew(tx, m, logs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	entries := make([]storage.DueEntry, 0, len(msgs))
	for i, m := range msgs {
		if !results[i].Deduplicated {
			entries = append(entries, storage.DueWith(m))
		}
	}
	e.disp.add(entries...)
	return results, nil
}

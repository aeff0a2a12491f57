package delivery

import (
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/storage"
)

// ErrQueueNotFound is returned when a queue operation names a queue the project does not have.
var ErrQueueNotFound = fmt.Errorf("queue %w", storage.ErrNotFound)

// ErrQueueLimit is returned when creating a queue would exceed Config.MaxQueues.
var ErrQueueLimit = errors.New("queue limit reached")

// DefaultQueueParallelism is the parallelism of a queue created by enqueueing to it, as
// in QStash.
const DefaultQueueParallelism = 1

// PublishResult is the answer for one published message.
type PublishResult struct {
	MessageID    string
	URL          string
	Deduplicated bool
}

// Publish stores plain messages; see PublishAll.
func (e *Engine) Publish(msgs []*Message) ([]PublishResult, error) {
	pubs := make([]Publication, len(msgs))
	for i, m := range msgs {
		pubs[i] = Publication{Message: m}
	}
	return e.PublishAll(pubs)
}

// PublishAll stores messages atomically and schedules them. It returns once they are
// durable. The caller fills the request fields (Project, URL, Method, Header, Body,
// Queue, Labels, CallerIP, NotBefore in unix ms or 0 for now, Retries, RetryDelay,
// TimeoutMs, DedupID, FlowControl, Callback, FailureCallback, and RunID / CallType for
// workflow messages); PublishAll assigns ID, Kind, CreatedAt, DueAt and State.
//
// A message whose DedupID was seen within DedupWindow, or that triggers a run id that is
// live, is not stored: its result is marked Deduplicated. A message for a queue the
// project does not have creates it with DefaultQueueParallelism. A workflow step for a
// run that ended fails the whole publication with ErrRunEnded.
func (e *Engine) PublishAll(pubs []Publication) ([]PublishResult, error) {
	now := e.now()
	perRun := map[string]int{}
	for _, p := range pubs {
		if id := p.Message.RunID; id != "" {
			if perRun[id]++; perRun[id] > e.cfg.MaxParallelSteps {
				return nil, fmt.Errorf("%w: more than %d messages for run %q in one request (parallel group too large)", ErrRunLimit, e.cfg.MaxParallelSteps, id)
			}
		}
	}
	logs := make([]*storage.LogEvent, len(pubs))
	for i, p := range pubs {
		prepare(p.Message, e.ids.New(storage.PrefixMessage, now), now)
		logs[i] = e.createdLog(p.Message, now)
	}
	results := make([]PublishResult, len(pubs))
	expires := now.Add(e.cfg.DedupWindow).UnixMilli()
	err := e.store.Update(func(tx *storage.Tx) error {
		for i, p := range pubs {
			m := p.Message
			results[i] = PublishResult{MessageID: m.ID, URL: m.URL}
			if m.Queue != "" {
				if err := e.ensureQueueTx(tx, m, now); err != nil {
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
			if m.RunID != "" {
				created := true
				var err error
				if p.Init != nil {
					created, err = e.createRunTx(tx, m, p.Init, now)
				} else {
					err = e.continueRunTx(tx, m, now)
				}
				if errors.Is(err, errDuplicateStep) {
					created, err = false, nil
				}
				if err != nil {
					return err
				}
				if !created {
					results[i].Deduplicated = true
					continue
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
	entries := make([]storage.DueEntry, 0, len(pubs))
	for i, p := range pubs {
		if !results[i].Deduplicated {
			entries = append(entries, storage.DueWith(p.Message))
		}
	}
	e.disp.add(entries...)
	return results, nil
}

// ensureQueueTx creates the message's queue if the project does not have it, as QStash
// does for an enqueue to a new queue.
func (e *Engine) ensureQueueTx(tx *storage.Tx, m *Message, now time.Time) error {
	_, err := tx.Queue(m.Project, m.Queue)
	if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if n := tx.QueueCount(m.Project); n >= e.cfg.MaxQueues {
		return fmt.Errorf("%w: the project has %d queues, the limit is %d", ErrQueueLimit, n, e.cfg.MaxQueues)
	}
	q := &storage.Queue{Name: m.Queue, Parallelism: DefaultQueueParallelism, CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli()}
	return tx.PutQueue(m.Project, q)
}

package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/delivery/internal/sched"
	"github.com/duraton/duraton/storage"
)

// ErrQueueNotFound is returned when a queue operation names a queue the project does not have.
var ErrQueueNotFound = fmt.Errorf("queue %w", storage.ErrNotFound)

// ErrQueueLimit is returned when creating a queue would exceed Config.MaxQueues.
var ErrQueueLimit = errors.New("queue limit reached")

// ErrFlowKeyLimit is returned when a publication or an operator's change would make a
// project hold more than Config.MaxFlowKeys flow-control keys.
var ErrFlowKeyLimit = errors.New("flow-control key limit reached")

// checkNewFlowKeys refuses a publication that would add flow-control keys to a project
// beyond MaxFlowKeys. Steps of runs already started are not checked: refusing them would
// break a run that was accepted.
func (e *Engine) checkNewFlowKeys(pubs []Publication) error {
	type pk struct{ project, key string }
	var fresh map[pk]bool
	for _, p := range pubs {
		m := p.Message
		if m.FlowControl == nil || (m.RunID != "" && p.Init == nil) {
			continue
		}
		if fresh == nil {
			fresh = map[pk]bool{}
		}
		fresh[pk{m.Project, m.FlowControl.Key}] = true
		for _, x := range m.FlowExtra {
			fresh[pk{m.Project, x.Key}] = true
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	var err error
	e.disp.locked(func(s *sched.Scheduler) {
		added := map[string]int{}
		for k := range fresh {
			if !s.HoldsKey(k.project, k.key) {
				added[k.project]++
			}
		}
		for project, n := range added {
			if have := s.KeyCount(project); have+n > e.cfg.MaxFlowKeys {
				err = fmt.Errorf("%w: the project has %d active flow-control keys, the limit is %d", ErrFlowKeyLimit, have, e.cfg.MaxFlowKeys)
				return
			}
		}
	})
	return err
}

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
func (e *Engine) Publish(ctx context.Context, msgs []*Message) ([]PublishResult, error) {
	pubs := make([]Publication, len(msgs))
	for i, m := range msgs {
		pubs[i] = Publication{Message: m}
	}
	return e.PublishAll(ctx, pubs)
}

// errQueueLock makes a publication that must create a queue run again under queueMu.
var errQueueLock = errors.New("delivery: queue creation needs the queue lock")

// PublishAll stores messages atomically and schedules them. It returns once they are
// durable. The caller fills the request fields (Project, URL, Method, Header, Body,
// Queue, Labels, CallerIP, NotBefore in unix ms or 0 for now, Retries, RetryDelay,
// TimeoutMs, DedupID, FlowControl, Callback, FailureCallback, and RunID / CallType for
// workflow messages); PublishAll assigns ID, Kind, CreatedAt, DueAt and State on the
// caller's messages, and the run's configuration on the messages it stores.
//
// A message whose DedupID was seen within DedupWindow, or that triggers a run id that is
// live, is not stored: its result is marked Deduplicated. A message for a queue the
// project does not have creates it with DefaultQueueParallelism. A workflow step for a
// run that ended fails the whole publication with ErrRunEnded.
func (e *Engine) PublishAll(ctx context.Context, pubs []Publication) ([]PublishResult, error) {
	return e.PublishAllWith(ctx, pubs, nil)
}

// PublishAllWith is PublishAll with also run first in the same transaction: the
// publication is stored only if also succeeds, and also's writes only with it (the
// schedule package moves a schedule's next tick this way). also may run more than once
// and must change nothing outside the transaction; its error is returned as is.
func (e *Engine) PublishAllWith(ctx context.Context, pubs []Publication, also func(*storage.Tx) error) ([]PublishResult, error) {
	now := e.now()
	perRun := map[string]int{}
	for _, p := range pubs {
		if id := p.Message.RunID; id != "" {
			if perRun[id]++; perRun[id] > e.cfg.MaxParallelSteps {
				return nil, fmt.Errorf("%w: more than %d messages for run %q in one request (parallel group too large)", ErrRunLimit, e.cfg.MaxParallelSteps, id)
			}
		}
	}
	if err := e.checkNewFlowKeys(pubs); err != nil {
		return nil, err
	}
	for _, p := range pubs {
		prepare(p.Message, e.ids.New(storage.PrefixMessage, now), now)
	}
	// A queue the scheduler does not know is new (every stored queue is loaded at
	// start): creating it goes through publishLocked. A queue deleted after this check
	// is found in the transaction (errQueueLock).
	unknown := false
	for _, p := range pubs {
		if p.Message.Queue != "" {
			e.disp.locked(func(s *sched.Scheduler) {
				for _, p := range pubs {
					if q := p.Message.Queue; q != "" && !s.KnowsQueue(p.Message.Project, q) {
						unknown = true
					}
				}
			})
			break
		}
	}
	eas := e.earlyOutcomes(pubs, now) // early.go
	var res publishResult
	err := errQueueLock
	if !unknown {
		res, err = e.publishTx(ctx, pubs, eas, also, false, now)
	}
	if errors.Is(err, errQueueLock) {
		res, err = e.publishLocked(ctx, pubs, eas, also, now)
	}
	if err != nil {
		return nil, err
	}
	e.disp.apply(effects{add: res.due})
	e.observePublished(pubs, res.results)
	e.earlyCommitted(res.early)
	return res.results, nil
}

// publishLocked stores a publication that may create queues. queueMu keeps queue
// settings reaching the scheduler in commit order with operator changes, and the
// scheduler is told of each queue the publication may create before the commit (a page
// of the due index read right after it must find the gate); a queue that was not
// created after all is withdrawn.
func (e *Engine) publishLocked(ctx context.Context, pubs []Publication, eas []*early, also func(*storage.Tx) error, now time.Time) (publishResult, error) {
	e.queueMu.Lock()
	defer e.queueMu.Unlock()
	var announced []createdQueue
	e.disp.locked(func(s *sched.Scheduler) {
		for _, p := range pubs {
			if q := p.Message.Queue; q != "" && !s.KnowsQueue(p.Message.Project, q) {
				s.ConfigureQueue(p.Message.Project, q, &sched.QueueSettings{Parallelism: DefaultQueueParallelism})
				announced = append(announced, createdQueue{project: p.Message.Project, queue: storage.Queue{Name: q}})
			}
		}
	})
	res, err := e.publishTx(ctx, pubs, eas, also, true, now)
	e.disp.locked(func(s *sched.Scheduler) {
		created := map[createdQueue]bool{}
		for _, q := range res.queues {
			created[createdQueue{project: q.project, queue: storage.Queue{Name: q.queue.Name}}] = true
			s.ConfigureQueue(q.project, q.queue.Name, queueSettings(&q.queue))
		}
		for _, q := range announced {
			if !created[q] {
				s.ConfigureQueue(q.project, q.queue.Name, nil)
			}
		}
	})
	return res, err
}

type publishResult struct {
	results []PublishResult
	due     []storage.DueEntry
	queues  []createdQueue
	early   []writtenEarly // the early outcomes written with it (early.go)
}

type createdQueue struct {
	project string
	queue   storage.Queue
}

// publishTx stores a publication, and the early outcomes eas of the deliveries that
// published it. Without lock (queueMu held by the caller) it fails with errQueueLock
// when a queue must be created.
func (e *Engine) publishTx(ctx context.Context, pubs []Publication, eas []*early, also func(*storage.Tx) error, lock bool, now time.Time) (publishResult, error) {
	expires := now.Add(e.cfg.DedupWindow).UnixMilli()
	return update(ctx, e.store, func(tx *storage.Tx) (publishResult, error) {
		res := publishResult{results: make([]PublishResult, len(pubs))}
		if also != nil {
			if err := also(tx); err != nil {
				return res, err
			}
		}
		for i, p := range pubs {
			m := *p.Message // the caller's message is only read: this run works on a copy
			res.results[i] = PublishResult{MessageID: m.ID, URL: m.URL}
			if m.Queue != "" {
				q, err := e.ensureQueueTx(tx, &m, now)
				if err != nil {
					return res, err
				}
				if q != nil {
					if !lock {
						return res, errQueueLock
					}
					res.queues = append(res.queues, createdQueue{project: m.Project, queue: *q})
				}
			}
			if m.DedupID != "" {
				rec, err := tx.Dedup(m.Project, m.DedupID)
				switch {
				case err == nil && rec.ExpiresAt > now.UnixMilli():
					res.results[i] = PublishResult{MessageID: rec.MessageID, URL: m.URL, Deduplicated: true}
					continue
				case err != nil && !errors.Is(err, storage.ErrNotFound):
					return res, err
				}
				if err := tx.PutDedup(m.Project, m.DedupID, &storage.DedupRecord{MessageID: m.ID, ExpiresAt: expires}); err != nil {
					return res, err
				}
			}
			if m.RunID != "" {
				stored, err := e.hooks.attach(tx, &m, p.Init, now)
				if err != nil {
					return res, err
				}
				if !stored {
					res.results[i].Deduplicated = true
					continue
				}
			}
			if err := putNew(tx, &m, e.createdLog(&m, now)); err != nil {
				return res, err
			}
			res.due = append(res.due, storage.DueWith(&m))
		}
		var err error
		res.early, err = e.earlyTx(tx, eas, now)
		return res, err
	})
}

// ensureQueueTx creates the message's queue if the project does not have it, as QStash
// does for an enqueue to a new queue.
// It returns the queue it created (nil: the queue exists).
func (e *Engine) ensureQueueTx(tx *storage.Tx, m *Message, now time.Time) (*storage.Queue, error) {
	_, err := tx.Queue(m.Project, m.Queue)
	if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	if n := tx.QueueCount(m.Project); n >= e.cfg.MaxQueues {
		return nil, fmt.Errorf("%w: the project has %d queues, the limit is %d", ErrQueueLimit, n, e.cfg.MaxQueues)
	}
	q := &storage.Queue{Name: m.Queue, Parallelism: DefaultQueueParallelism, CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli()}
	return q, tx.PutQueue(m.Project, q)
}

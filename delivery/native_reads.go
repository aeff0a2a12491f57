package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/delivery/internal/sched"
	"github.com/duraton/duraton/storage"
)

// Activity of a live run, as the native run reads (GET /runs) report it.
const (
	ActivityRunning  = "running"  // a delivery to the workflow URL is in flight
	ActivityQueued   = "queued"   // a delivery is due and waits for admission
	ActivitySleeping = "sleeping" // the next delivery is due later (a sleep step or a retry backoff)
	ActivityWaiting  = "waiting"  // nothing is due: an event, a call or an invoked run is awaited
)

// RunActivity is what a live run is doing now, and why it waits when it does.
type RunActivity struct {
	Activity string
	Reason   string
	Since    time.Time
}

// pendingDelivery is one of a run's pending messages as the activity read needs it.
type pendingDelivery struct {
	due  storage.DueEntry
	call bool // a call to a third-party URL, not a delivery to the workflow
	m    *Message
}

// RunActivities reads what each live run of ids is doing; an id that is not a live
// run of the project is left out of the answer.
func (e *Engine) RunActivities(ctx context.Context, project string, ids []string) (map[string]RunActivity, error) {
	type live struct {
		run     *Run
		pending []pendingDelivery
		last    int64 // unix ms of the last history entry
	}
	lives, err := view(ctx, e.store, func(tx *storage.Tx) ([]live, error) {
		var out []live
		for _, id := range ids {
			run, err := tx.Run(project, id)
			if errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if !run.Live() {
				continue
			}
			l := live{run: run, last: run.CreatedAt}
			if run.HistoryLen > 0 {
				h, err := tx.History(project, id, run.HistoryLen)
				if err != nil {
					return nil, err
				}
				l.last = h[len(h)-1].CreatedAt
			}
			mids, err := tx.RunMessages(project, id)
			if err != nil {
				return nil, err
			}
			for _, mid := range mids {
				m, err := tx.Message(project, mid)
				if errors.Is(err, storage.ErrNotFound) {
					continue // delivered meanwhile
				}
				if err != nil {
					return nil, err
				}
				l.pending = append(l.pending, pendingDelivery{due: storage.DueOf(m), call: m.URL != run.URL, m: m})
			}
			out = append(out, l)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	now := e.now()
	out := make(map[string]RunActivity, len(lives))
	e.disp.locked(func(s *sched.Scheduler) {
		for _, l := range lives {
			out[l.run.ID] = activityOf(s, l.pending, l.run.HistoryLen > 1, time.UnixMilli(l.last), now)
		}
	})
	return out, nil
}

// activityOf classifies a live run by its pending deliveries: one in flight makes it
// running (waiting when that delivery is a call), one due makes it queued, one due later
// sleeping — or queued when it is the first delivery of a run with no step yet, due
// later (a throttled first delivery is due now and waits in the scheduler); a run with only a wait's timeout timer, or nothing pending, waits.
func activityOf(s *sched.Scheduler, pending []pendingDelivery, stepped bool, last, now time.Time) RunActivity {
	var queued, sleeping *pendingDelivery
	callInFlight := false
	for i := range pending {
		p := &pending[i]
		if p.due.Timer {
			continue
		}
		if s.Running(p.due.MessageID) {
			if !p.call {
				return RunActivity{Activity: ActivityRunning, Since: time.UnixMilli(p.m.CreatedAt)}
			}
			callInFlight = true
			continue
		}
		if p.due.DueAt <= now.UnixNano() {
			queued = p
		} else if sleeping == nil || p.due.DueAt < sleeping.due.DueAt {
			sleeping = p
		}
	}
	switch {
	case callInFlight:
		return RunActivity{Activity: ActivityWaiting, Reason: "a call step is in flight", Since: last}
	case queued != nil:
		reason, since, ok := s.WaitReason(queued.due)
		if !ok {
			reason, since = "due, waiting for a delivery slot", time.Unix(0, queued.due.DueAt)
		}
		return RunActivity{Activity: ActivityQueued, Reason: reason, Since: since}
	case sleeping != nil && !stepped && sleeping.m.Retried == 0:
		at := time.Unix(0, sleeping.due.DueAt).UTC().Format(time.RFC3339Nano)
		return RunActivity{Activity: ActivityQueued, Reason: "the first delivery is due at " + at, Since: time.UnixMilli(sleeping.m.CreatedAt)}
	case sleeping != nil:
		at := time.Unix(0, sleeping.due.DueAt).UTC().Format(time.RFC3339Nano)
		reason := "sleeping until " + at
		if sleeping.m.Retried > 0 {
			reason = fmt.Sprintf("retrying at %s after %d failed attempts", at, sleeping.m.Retried)
		}
		return RunActivity{Activity: ActivitySleeping, Reason: reason, Since: last}
	}
	for i := range pending {
		if pending[i].due.Timer {
			return RunActivity{Activity: ActivityWaiting, Reason: "waiting for an event until " + time.Unix(0, pending[i].due.DueAt).UTC().Format(time.RFC3339Nano), Since: last}
		}
	}
	return RunActivity{Activity: ActivityWaiting, Reason: "waiting for an event or an invoked run", Since: last}
}

// Now is the engine's clock (the injected one in tests).
func (e *Engine) Now() time.Time { return e.now() }

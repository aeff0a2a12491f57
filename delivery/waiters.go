package delivery

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/storage"
)

// WaitRequest registers a run's wait for an event (POST /v2/wait/{eventId}).
type WaitRequest struct {
	Project, EventID, RunID string
	// Timeout is how long to wait; TimeoutText is how the SDK wrote it ("7d").
	Timeout     time.Duration
	TimeoutText string
	// Step is the wait step object the SDK sent (raw JSON); the resumption echoes it.
	Step []byte
	// Resume and OnTimeout are the publish-style messages that continue the run when the
	// event arrives or the timeout passes.
	Resume, OnTimeout *Message
	// If is the wait's condition (the Duraton-Wait-If header): a CEL expression over
	// `event` (the run's triggering event) and `async` (the incoming one); "" for none.
	If string
}

// Wait registers a waiter and its timeout timer. If the event already arrived for this
// run (lookback), the run is resumed at once instead.
func (e *Engine) Wait(ctx context.Context, r WaitRequest) error {
	if r.Timeout <= 0 || r.Timeout > e.cfg.MaxWaitTimeout {
		return fmt.Errorf("%w: wait timeout %s must be between 1s and %s", ErrRunLimit, r.Timeout, e.cfg.MaxWaitTimeout)
	}
	if r.If != "" {
		if err := e.CompileWaitCondition(r.If); err != nil {
			return err
		}
	}
	now := e.now()
	due, err := update(ctx, e.store, func(tx *storage.Tx) (*storage.DueEntry, error) {
		run, err := tx.Run(r.Project, r.RunID)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, fmt.Errorf("%w: %q", ErrRunNotFound, r.RunID)
		}
		if err != nil {
			return nil, err
		}
		if !run.Live() {
			return nil, fmt.Errorf("%w: run %q is %s", ErrRunEnded, run.ID, run.State)
		}
		event, err := e.takeRunEventTx(tx, r.Project, r.RunID, r.EventID, now) // webhooks.go
		switch {
		case err == nil:
			step, err := stepWith(r.Step, map[string]any{"out": base64.StdEncoding.EncodeToString(event), "waitTimeout": false})
			if err != nil {
				return nil, err
			}
			return e.wf.publishStepTx(tx, r.Resume, step, now)
		case !errors.Is(err, storage.ErrNotFound):
			return nil, err
		}
		timer := &Message{
			Project: r.Project, Kind: storage.KindWaitTimeout, RunID: r.RunID, EventID: r.EventID,
			URL: r.OnTimeout.URL, Method: "POST", NotBefore: now.Add(r.Timeout).UnixMilli(),
		}
		prepare(timer, e.ids.New(storage.PrefixMessage, now), now)
		w := &Waiter{
			EventID: r.EventID, RunID: r.RunID, Deadline: timer.NotBefore, Timeout: r.TimeoutText,
			Step: r.Step, Template: r.Resume, OnTimeout: r.OnTimeout, TimerID: timer.ID, CreatedAt: now.UnixMilli(),
		}
		if r.If != "" {
			if err := e.conditionTx(tx, r.Project, r.RunID, r.If, w); err != nil {
				return nil, err
			}
		}
		if err := tx.PutWaiter(r.Project, w); err != nil {
			return nil, err
		}
		if err := putNew(tx, timer, e.createdLog(timer, now)); err != nil {
			return nil, err
		}
		d := storage.DueOf(timer)
		return &d, tx.LinkRunMessage(r.Project, r.RunID, timer.ID)
	})
	if err == nil && due != nil {
		e.disp.apply(effects{add: []storage.DueEntry{*due}})
	}
	return err
}

// NotifyResult is one waiter a notify resolved, with the message that resumes its run.
type NotifyResult struct {
	Waiter    Waiter
	MessageID string
}

// Notify delivers an event to its waiters: each is removed, its timer cancelled, and its
// run resumed with a Wait step whose out is the base64 of data. With runID set only that
// run's waiter is considered, and if it is not waiting yet the event is kept until it
// waits (lookback). Every waiter registered when the transaction runs is resolved, up to
// Config.MaxNotifyWaiters.
//
// more reports that more waiters of the event than Config.MaxNotifyWaiters were waiting: only
// the first Config.MaxNotifyWaiters were woken, and notifying again wakes the next ones.
func (e *Engine) Notify(ctx context.Context, project, eventID, runID string, data []byte) (notified []NotifyResult, more bool, err error) {
	type result struct {
		notified []NotifyResult
		more     bool
		fx       effects
	}
	now := e.now()
	res, err := update(ctx, e.store, func(tx *storage.Tx) (result, error) {
		var res result
		ws, more, err := e.waitersTx(tx, project, eventID, runID, IncomingEvent{Name: eventID, Data: data, Ts: now.UnixMilli()})
		if err != nil {
			return res, err
		}
		res.more = more
		if res.notified, res.fx, err = e.resolveWaitersTx(tx, project, ws, data, now); err != nil {
			return res, err
		}
		if len(ws) == 0 && runID != "" {
			run, err := tx.Run(project, runID)
			if errors.Is(err, storage.ErrNotFound) {
				return res, fmt.Errorf("%w: %q", ErrRunNotFound, runID)
			}
			if err != nil {
				return res, err
			}
			if run.Live() {
				return res, e.putRunEventTx(tx, project, runID, eventID, data, now) // webhooks.go
			}
		}
		return res, nil
	})
	if err != nil {
		return nil, false, err
	}
	e.disp.apply(res.fx)
	return res.notified, res.more, nil
}

// resolveWaitersTx resolves waiters with data: each is removed, its timer cancelled and
// its run resumed (a waiter whose run ended is only removed).
func (e *Engine) resolveWaitersTx(tx *storage.Tx, project string, ws []Waiter, data []byte, now time.Time) ([]NotifyResult, effects, error) {
	var (
		out []NotifyResult
		fx  effects
	)
	for _, w := range ws {
		timer, err := e.wf.dropWaiterTx(tx, project, &w)
		if err != nil {
			return nil, fx, err
		}
		if timer != nil {
			fx.forget = append(fx.forget, *timer)
		}
		step, err := stepWith(w.Step, map[string]any{"out": base64.StdEncoding.EncodeToString(data), "waitTimeout": false})
		if err != nil {
			return nil, fx, err
		}
		due, err := e.wf.publishStepTx(tx, w.Template, step, now)
		if errors.Is(err, ErrRunEnded) || errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fx, err
		}
		id := ""
		if due != nil {
			fx.add = append(fx.add, *due)
			id = due.MessageID
		}
		out = append(out, NotifyResult{Waiter: w, MessageID: id})
	}
	return out, fx, nil
}

// waitersTx lists the waiters in wakes (waitcond.go), of runID only when set; more
// reports that more than Config.MaxNotifyWaiters would have woken.
func (e *Engine) waitersTx(tx *storage.Tx, project, eventID, runID string, in IncomingEvent) ([]Waiter, bool, error) {
	if runID == "" {
		return e.wakeableTx(tx, project, eventID, in, e.cfg.MaxNotifyWaiters)
	}
	w, err := tx.Waiter(project, eventID, runID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !e.waiterHolds(w, in) {
		return nil, false, nil
	}
	return []Waiter{*w}, false, nil
}

// dropWaiterTx removes a waiter and its timer; it returns the timer's due entry (nil when
// the timer was gone).
func (w *runs) dropWaiterTx(tx *storage.Tx, project string, wt *Waiter) (*storage.DueEntry, error) {
	if err := tx.DeleteWaiter(project, wt.EventID, wt.RunID); err != nil {
		return nil, err
	}
	timer, err := tx.Message(project, wt.TimerID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	due := storage.DueOf(timer)
	if err := tx.DeleteDue(due); err != nil {
		return nil, err
	}
	if err := tx.DeleteMessage(project, timer.ID); err != nil {
		return nil, err
	}
	return &due, tx.UnlinkRunMessage(project, wt.RunID, timer.ID)
}

// fireWaitTimeout resolves a wait whose timeout passed: the run is resumed with a Wait
// step marked waitTimeout and no out. It returns the resumption's due entry, if any.
func (e *Engine) fireWaitTimeout(timer *Message) ([]storage.DueEntry, error) {
	now := e.now()
	due, err := update(context.Background(), e.store, func(tx *storage.Tx) (*storage.DueEntry, error) {
		if !tx.HasDue(storage.DueOf(timer)) {
			return nil, storage.ErrConflict
		}
		w, err := tx.Waiter(timer.Project, timer.EventID, timer.RunID)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return nil, err
		}
		if err == nil && w.TimerID == timer.ID {
			if _, err := e.wf.dropWaiterTx(tx, timer.Project, w); err != nil {
				return nil, err
			}
			step, err := stepWith(w.Step, map[string]any{"waitTimeout": true, "out": nil})
			if err != nil {
				return nil, err
			}
			due, err := e.wf.publishStepTx(tx, w.OnTimeout, step, now)
			if errors.Is(err, ErrRunEnded) || errors.Is(err, storage.ErrNotFound) {
				return nil, nil
			}
			return due, err
		}
		// The waiter is gone (notified or replaced): the timer just ends.
		if err := tx.DeleteDue(storage.DueOf(timer)); err != nil {
			return nil, err
		}
		if err := tx.DeleteMessage(timer.Project, timer.ID); err != nil {
			return nil, err
		}
		return nil, tx.UnlinkRunMessage(timer.Project, timer.RunID, timer.ID)
	})
	if errors.Is(err, storage.ErrConflict) {
		return nil, nil // cancelled or resolved meanwhile
	}
	if err != nil || due == nil {
		return nil, err
	}
	return []storage.DueEntry{*due}, nil
}

// Waiters lists the waiters of an event.
func (e *Engine) Waiters(ctx context.Context, project, eventID string) ([]Waiter, error) {
	return view(ctx, e.store, func(tx *storage.Tx) ([]Waiter, error) {
		return tx.AllWaiters(project, eventID, e.cfg.MaxNotifyWaiters, e.cfg.MaxPageBytes)
	})
}

// ProjectForUser finds the project whose webhooks carry userID (docs/protocol.md, "Waits,
// notify and webhooks").
func (e *Engine) ProjectForUser(ctx context.Context, userID string) (string, error) {
	projects, err := ListProjects(ctx, e.store)
	if err != nil {
		return "", err
	}
	for _, p := range projects {
		if p.UserID == userID || (p.UserID == "" && p.ID == userID) {
			return p.ID, nil
		}
	}
	return "", ErrNotFound
}

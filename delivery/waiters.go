package delivery

import (
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
}

// maxNotifyWaiters caps the waiters one notify resolves.
const maxNotifyWaiters = 1000

// Wait registers a waiter and its timeout timer. If the event already arrived for this
// run (lookback), the run is resumed at once instead.
func (e *Engine) Wait(r WaitRequest) error {
	if r.Timeout <= 0 || r.Timeout > e.cfg.MaxWaitTimeout {
		return fmt.Errorf("%w: wait timeout %s must be between 1s and %s", ErrRunLimit, r.Timeout, e.cfg.MaxWaitTimeout)
	}
	now := e.now()
	ids := e.newInternalIDs(now)
	timer := &Message{
		Project: r.Project, Kind: storage.KindWaitTimeout, RunID: r.RunID, EventID: r.EventID,
		URL: r.OnTimeout.URL, Method: "POST", NotBefore: now.Add(r.Timeout).UnixMilli(),
	}
	prepare(timer, e.ids.New(storage.PrefixMessage, now), now)
	timerLog := e.createdLog(timer, now)
	var due *storage.DueEntry
	err := e.store.Update(func(tx *storage.Tx) error {
		due = nil
		run, err := tx.Run(r.Project, r.RunID)
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("%w: %q", ErrRunNotFound, r.RunID)
		}
		if err != nil {
			return err
		}
		if !run.Live() {
			return fmt.Errorf("%w: run %q is %s", ErrRunEnded, run.ID, run.State)
		}
		if event, err := tx.TakeLookback(r.Project, r.RunID, r.EventID); err == nil {
			step, err := stepWith(r.Step, map[string]any{"out": base64.StdEncoding.EncodeToString(event), "waitTimeout": false})
			if err != nil {
				return err
			}
			due, err = e.publishStepTx(tx, r.Resume, step, ids, now)
			return err
		}
		if err := tx.PutWaiter(r.Project, &Waiter{
			EventID: r.EventID, RunID: r.RunID, Deadline: timer.NotBefore, Timeout: r.TimeoutText,
			Step: r.Step, Template: r.Resume, OnTimeout: r.OnTimeout, TimerID: timer.ID, CreatedAt: now.UnixMilli(),
		}); err != nil {
			return err
		}
		if err := putNew(tx, timer, timerLog); err != nil {
			return err
		}
		d := storage.DueOf(timer)
		due = &d
		return tx.LinkRunMessage(r.Project, r.RunID, timer.ID)
	})
	if err == nil && due != nil {
		e.disp.add(*due)
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
// waits (lookback).
func (e *Engine) Notify(project, eventID, runID string, data []byte) ([]NotifyResult, error) {
	now := e.now()
	var count int
	if err := e.store.View(func(tx *storage.Tx) error {
		ws, err := e.waitersTx(tx, project, eventID, runID)
		count = len(ws)
		return err
	}); err != nil {
		return nil, err
	}
	ids := make([]internalIDs, count+8) // a few spare for waiters that arrive meanwhile
	for i := range ids {
		ids[i] = e.newInternalIDs(now)
	}
	var results []NotifyResult
	var dues []storage.DueEntry
	err := e.store.Update(func(tx *storage.Tx) error {
		results, dues = results[:0], dues[:0]
		ws, err := e.waitersTx(tx, project, eventID, runID)
		if err != nil {
			return err
		}
		if len(ws) > len(ids) {
			ws = ws[:len(ids)]
		}
		for i, w := range ws {
			if err := e.dropWaiterTx(tx, project, &w); err != nil {
				return err
			}
			step, err := stepWith(w.Step, map[string]any{"out": base64.StdEncoding.EncodeToString(data), "waitTimeout": false})
			if err != nil {
				return err
			}
			due, err := e.publishStepTx(tx, w.Template, step, ids[i], now)
			if errors.Is(err, ErrRunEnded) || errors.Is(err, storage.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if due != nil {
				dues = append(dues, *due)
			}
			results = append(results, NotifyResult{Waiter: w, MessageID: ids[i].msg})
		}
		if len(ws) == 0 && runID != "" {
			run, err := tx.Run(project, runID)
			if err != nil {
				return fmt.Errorf("%w: %q", ErrRunNotFound, runID)
			}
			if run.Live() {
				return tx.PutLookback(project, runID, eventID, data)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.disp.add(dues...)
	return results, nil
}

func (e *Engine) waitersTx(tx *storage.Tx, project, eventID, runID string) ([]Waiter, error) {
	if runID == "" {
		return tx.Waiters(project, eventID, maxNotifyWaiters)
	}
	w, err := tx.Waiter(project, eventID, runID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []Waiter{*w}, nil
}

// dropWaiterTx removes a waiter and its timer.
func (e *Engine) dropWaiterTx(tx *storage.Tx, project string, w *Waiter) error {
	if err := tx.DeleteWaiter(project, w.EventID, w.RunID); err != nil {
		return err
	}
	timer, err := tx.Message(project, w.TimerID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := tx.DeleteDue(storage.DueOf(timer)); err != nil {
		return err
	}
	if err := tx.DeleteMessage(project, timer.ID); err != nil {
		return err
	}
	return tx.UnlinkRunMessage(project, w.RunID, timer.ID)
}

// fireWaitTimeout resolves a wait whose timeout passed: the run is resumed with a Wait
// step marked waitTimeout and no out.
func (e *Engine) fireWaitTimeout(timer *Message) []storage.DueEntry {
	now := e.now()
	ids := e.newInternalIDs(now)
	var due *storage.DueEntry
	err := e.store.Update(func(tx *storage.Tx) error {
		due = nil
		if !tx.HasDue(storage.DueOf(timer)) {
			return storage.ErrConflict
		}
		w, err := tx.Waiter(timer.Project, timer.EventID, timer.RunID)
		if err == nil && w.TimerID == timer.ID {
			if err := e.dropWaiterTx(tx, timer.Project, w); err != nil {
				return err
			}
			step, err := stepWith(w.Step, map[string]any{"waitTimeout": true, "out": nil})
			if err != nil {
				return err
			}
			due, err = e.publishStepTx(tx, w.OnTimeout, step, ids, now)
			if errors.Is(err, ErrRunEnded) || errors.Is(err, storage.ErrNotFound) {
				due, err = nil, nil
			}
			return err
		}
		// The waiter is gone (notified or replaced): the timer just ends.
		if err := tx.DeleteDue(storage.DueOf(timer)); err != nil {
			return err
		}
		if err := tx.DeleteMessage(timer.Project, timer.ID); err != nil {
			return err
		}
		return tx.UnlinkRunMessage(timer.Project, timer.RunID, timer.ID)
	})
	if err != nil {
		if !errors.Is(err, storage.ErrConflict) {
			e.log.Error("fire wait timeout", "run_id", timer.RunID, "event_id", timer.EventID, "err", err)
		}
		return nil
	}
	if due == nil {
		return nil
	}
	return []storage.DueEntry{*due}
}

// Waiters lists the waiters of an event.
func (e *Engine) Waiters(project, eventID string) ([]Waiter, error) {
	var out []Waiter
	err := e.store.View(func(tx *storage.Tx) error {
		var err error
		out, err = tx.Waiters(project, eventID, maxNotifyWaiters)
		return err
	})
	return out, err
}

// ProjectForUser finds the project whose webhooks carry userID (protocol §5.11).
func (e *Engine) ProjectForUser(userID string) (string, error) {
	projects, err := ListProjects(e.store)
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

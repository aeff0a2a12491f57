package delivery

import (
	"fmt"
	"sort"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// loadFlow restores what flow control must remember across restarts: every key's recent
// rate starts and the operator's pauses and pins. In-flight slots are not restored: every
// delivery that was in flight is back in the due index and waits again.
func (d *dispatcher) loadFlow() error {
	projects, err := ListProjects(d.e.store)
	if err != nil {
		return err
	}
	return d.e.store.View(func(tx *storage.Tx) error {
		for _, p := range projects {
			starts, err := tx.RateStarts(p.ID)
			if err != nil {
				return err
			}
			for key, s := range starts {
				d.queue(flowID{p.ID, key}).key.Window.Restore(s)
			}
			settings, err := tx.FlowKeys(p.ID)
			if err != nil {
				return err
			}
			for key, s := range settings {
				k := d.queue(flowID{p.ID, key}).key
				k.Paused, k.Pins = s.Paused, s.Pins
			}
		}
		return nil
	})
}

// FlowKeys lists a project's flow-control keys that are active (waiting, in flight,
// within a rate window) or configured, whose names contain search.
func (e *Engine) FlowKeys(project, search string) []FlowInfo {
	d := e.disp
	d.lock()
	defer d.unlock()
	out := d.flowInfos(project, search, e.now())
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// FlowKey returns one key's state; a key never seen is idle with no limits.
func (e *Engine) FlowKey(project, key string) FlowInfo {
	d := e.disp
	d.lock()
	defer d.unlock()
	if q := d.flow.queues[flowID{project, key}]; q != nil {
		return q.info(e.now())
	}
	return FlowInfo{Key: key, RatePeriod: flowctl.DefaultPeriod}
}

// GlobalParallelism is a project's ceiling (0: none) and its deliveries in flight.
func (e *Engine) GlobalParallelism(project string) (max, count int) {
	d := e.disp
	d.lock()
	defer d.unlock()
	return e.cfg.ProjectCeiling, d.flow.inFlight[project]
}

// SetFlowKeyPaused pauses or resumes a key. A paused key keeps accepting deliveries into
// its waitlist and starts none.
func (e *Engine) SetFlowKeyPaused(project, key string, paused bool) error {
	return e.changeFlowKey(project, key, func(k *flowctl.Key) { k.Paused = paused })
}

// PinFlowKey fixes a key's parallelism and/or rate (zero values leave that part as is).
func (e *Engine) PinFlowKey(project, key string, parallelism, rate int, period time.Duration) error {
	if parallelism < 0 || rate < 0 || parallelism > flowctl.MaxParallelism || rate > flowctl.MaxRate || period < 0 || period > flowctl.MaxPeriod {
		return fmt.Errorf("%w: pin values out of range", flowctl.ErrInvalid)
	}
	if parallelism == 0 && rate == 0 {
		return fmt.Errorf("%w: pin needs parallelism or rate", flowctl.ErrInvalid)
	}
	if period == 0 {
		period = flowctl.DefaultPeriod
	}
	return e.changeFlowKey(project, key, func(k *flowctl.Key) {
		if parallelism > 0 {
			k.Pins.Parallelism = parallelism
		}
		if rate > 0 {
			k.Pins.Rate, k.Pins.Period = rate, period
		}
	})
}

// UnpinFlowKey removes a key's pins.
func (e *Engine) UnpinFlowKey(project, key string, parallelism, rate bool) error {
	return e.changeFlowKey(project, key, func(k *flowctl.Key) {
		if parallelism {
			k.Pins.Parallelism = 0
		}
		if rate {
			k.Pins.Rate, k.Pins.Period = 0, 0
		}
	})
}

// ResetFlowKeyRate forgets a key's recent starts, so its rate window starts afresh.
func (e *Engine) ResetFlowKeyRate(project, key string) error {
	e.flowMu.Lock()
	defer e.flowMu.Unlock()
	if err := e.store.Update(func(tx *storage.Tx) error { return tx.ResetRate(project, key) }); err != nil {
		return err
	}
	return e.changeFlowKeyLocked(project, key, func(k *flowctl.Key) { k.Window.Reset() })
}

// changeFlowKey applies an operator change to a key, persists its settings and lets
// whatever the change allows start.
func (e *Engine) changeFlowKey(project, key string, change func(*flowctl.Key)) error {
	e.flowMu.Lock()
	defer e.flowMu.Unlock()
	return e.changeFlowKeyLocked(project, key, change)
}

// changeFlowKeyLocked is changeFlowKey for a caller holding flowMu, which keeps the
// stored settings in the order the changes were made.
func (e *Engine) changeFlowKeyLocked(project, key string, change func(*flowctl.Key)) error {
	if _, err := flowctl.Parse(key, "parallelism=1"); err != nil {
		return err // validates the key's syntax
	}
	d := e.disp
	d.lock()
	q := d.queue(flowID{project, key})
	change(q.key)
	settings := storage.FlowKeySettings{Paused: q.key.Paused, Pins: q.key.Pins}
	d.unlock()
	if err := e.store.Update(func(tx *storage.Tx) error { return tx.PutFlowKey(project, key, settings) }); err != nil {
		return err
	}
	d.lock()
	now := e.now()
	d.pump(d.ctx, q, now, -1)
	d.evictIfIdle(q, now)
	d.unlock()
	d.signal()
	return nil
}

// WaitReason says why a pending message of a project has not started: the constraint
// its waitlist's head waits for (or that earlier deliveries of its key are ahead of it)
// and since when it waits. ok is false when the message is not in a waitlist.
func (e *Engine) WaitReason(project, messageID string) (reason string, since time.Time, ok bool) {
	var m *Message
	if err := e.store.View(func(tx *storage.Tx) error {
		var err error
		m, err = tx.Message(project, messageID)
		return err
	}); err != nil {
		return "", time.Time{}, false
	}
	due := storage.DueOf(m)
	d := e.disp
	d.lock()
	defer d.unlock()
	q := d.flow.queues[flowID{project, due.FlowKey}]
	if q == nil {
		return "", time.Time{}, false
	}
	item, found := q.waiting.Get(newWaitItem(due, time.Time{}))
	if !found {
		return "", time.Time{}, false
	}
	reason = q.blockedBy
	if head, _ := q.waiting.Min(); head.id != item.id {
		reason = fmt.Sprintf("queued behind earlier deliveries of key %q (%d waiting); the first waits for %s", q.id.key, q.waiting.Len(), q.blockedBy)
	}
	return reason, time.Unix(0, item.since), true
}

// RunWaitReason says why a live run's next delivery has not started, if one of its
// messages waits in a flow-control waitlist.
func (e *Engine) RunWaitReason(project, runID string) (reason string, since time.Time, ok bool) {
	var ids []string
	if err := e.store.View(func(tx *storage.Tx) error {
		var err error
		ids, err = tx.RunMessages(project, runID)
		return err
	}); err != nil {
		return "", time.Time{}, false
	}
	for _, id := range ids {
		if reason, since, ok := e.WaitReason(project, id); ok {
			return reason, since, true
		}
	}
	return "", time.Time{}, false
}

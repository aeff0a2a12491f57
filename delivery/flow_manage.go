package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/delivery/internal/sched"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// FlowInfo is the state of one flow-control key (the QStash API's FlowControlInfo, GET
// /v2/flowControl/{key}).
type FlowInfo = sched.FlowInfo

// loadSchedulerState gives the scheduler what it must know before the first dispatch:
// every queue's settings, and per flow-control key its recent rate starts and the
// operator's pauses and pins. In-flight slots are not restored: every delivery that was
// in flight is back in the due index and waits again.
func (e *Engine) loadSchedulerState(ctx context.Context) error {
	projects, err := ListProjects(ctx, e.store)
	if err != nil {
		return err
	}
	type projectState struct {
		queues   []storage.Queue
		starts   map[string][]int64
		settings map[string]storage.FlowKeySettings
		gates    map[string]flowctl.GCRA
		tokenAvg map[string]int64 // tokenThrottle scopes' averages (internal/aimeter/tokens.go)
	}
	states := make([]projectState, len(projects))
	if err := e.store.View(func(tx *storage.Tx) error {
		for i, p := range projects {
			var st projectState
			var err error
			if st.queues, err = tx.Queues(p.ID); err != nil {
				return err
			}
			if st.starts, err = tx.RateStarts(p.ID); err != nil {
				return err
			}
			if st.settings, err = tx.FlowKeys(p.ID); err != nil {
				return err
			}
			if st.gates, err = tx.BusyGCRAs(p.ID, e.now().UnixNano()); err != nil {
				return err
			}
			if st.tokenAvg, err = tx.TokenAverages(p.ID); err != nil {
				return err
			}
			states[i] = st
		}
		return nil
	}); err != nil {
		return err
	}
	e.disp.locked(func(s *sched.Scheduler) {
		for i, p := range projects {
			for _, q := range states[i].queues {
				s.ConfigureQueue(p.ID, q.Name, queueSettings(&q))
			}
			for key, starts := range states[i].starts {
				s.RestoreKey(p.ID, key, starts, nil)
			}
			for key, set := range states[i].settings {
				s.RestoreKey(p.ID, key, nil, &sched.KeySettings{Paused: set.Paused, Pins: set.Pins})
			}
			for key, g := range states[i].gates {
				s.RestoreGate(p.ID, key, g)
			}
			for key, avg := range states[i].tokenAvg {
				s.AdjustTokens(p.ID, key, 0, avg, e.now(), nil)
			}
		}
	})
	return nil
}

// FlowKeys lists a project's flow-control keys that are active (waiting, in flight,
// within a rate window) or configured, whose names contain search.
func (e *Engine) FlowKeys(project, search string) []FlowInfo {
	var out []FlowInfo
	e.disp.locked(func(s *sched.Scheduler) { out = s.FlowKeys(project, search, e.now()) })
	return out
}

// FlowKey returns one key's state; a key never seen is idle with no limits.
func (e *Engine) FlowKey(project, key string) FlowInfo {
	var out FlowInfo
	e.disp.locked(func(s *sched.Scheduler) { out = s.FlowKey(project, key, e.now()) })
	return out
}

// GlobalParallelism is a project's ceiling (0: none) and its deliveries in flight.
func (e *Engine) GlobalParallelism(project string) (max, count int) {
	e.disp.locked(func(s *sched.Scheduler) { max, count = s.ProjectCeiling(), s.ProjectInFlight(project) })
	return max, count
}

// SetFlowKeyPaused pauses or resumes a key. A paused key keeps accepting deliveries into
// its waitlist and starts none.
func (e *Engine) SetFlowKeyPaused(ctx context.Context, project, key string, paused bool) error {
	return e.changeFlowKey(ctx, project, key, func(k *flowctl.Key) { k.Paused = paused })
}

// PinFlowKey fixes a key's parallelism and/or rate (zero values leave that part as is).
func (e *Engine) PinFlowKey(ctx context.Context, project, key string, parallelism, rate int, period time.Duration) error {
	if parallelism < 0 || rate < 0 || parallelism > flowctl.MaxParallelism || rate > flowctl.MaxRate || period < 0 || period > flowctl.MaxPeriod {
		return fmt.Errorf("%w: pin values out of range", flowctl.ErrInvalid)
	}
	if parallelism == 0 && rate == 0 {
		return fmt.Errorf("%w: pin needs parallelism or rate", flowctl.ErrInvalid)
	}
	if period == 0 {
		period = flowctl.DefaultPeriod
	}
	return e.changeFlowKey(ctx, project, key, func(k *flowctl.Key) {
		if parallelism > 0 {
			k.Pins.Parallelism = parallelism
		}
		if rate > 0 {
			k.Pins.Rate, k.Pins.Period = rate, period
		}
	})
}

// UnpinFlowKey removes a key's pins.
func (e *Engine) UnpinFlowKey(ctx context.Context, project, key string, parallelism, rate bool) error {
	return e.changeFlowKey(ctx, project, key, func(k *flowctl.Key) {
		if parallelism {
			k.Pins.Parallelism = 0
		}
		if rate {
			k.Pins.Rate, k.Pins.Period = 0, 0
		}
	})
}

// ResetFlowKeyRate forgets a key's recent starts, so its rate window starts afresh.
func (e *Engine) ResetFlowKeyRate(ctx context.Context, project, key string) error {
	if err := flowctl.CheckKey(key); err != nil {
		return err // validates the key's syntax
	}
	e.flowMu.Lock()
	defer e.flowMu.Unlock()
	if _, err := update(ctx, e.store, func(tx *storage.Tx) (struct{}, error) { return struct{}{}, tx.ResetRate(project, key) }); err != nil {
		return err
	}
	e.disp.with(func(s *sched.Scheduler) []sched.Start {
		_, starts := s.ChangeKey(project, key, func(k *flowctl.Key) { k.Window.Reset() }, e.now())
		return starts
	})
	return nil
}

// changeFlowKey applies an operator change to a key, stores the key's settings, and then
// lets whatever the change allows start. flowMu keeps the stored settings in the order
// the changes were made.
func (e *Engine) changeFlowKey(ctx context.Context, project, key string, change func(*flowctl.Key)) error {
	if err := flowctl.CheckKey(key); err != nil {
		return err // validates the key's syntax
	}
	e.flowMu.Lock()
	defer e.flowMu.Unlock()
	var settings sched.KeySettings
	var err error
	e.disp.locked(func(s *sched.Scheduler) {
		if !s.HoldsKey(project, key) && s.KeyCount(project) >= e.cfg.MaxFlowKeys {
			err = fmt.Errorf("%w: the project has %d active flow-control keys, the limit is %d", ErrFlowKeyLimit, s.KeyCount(project), e.cfg.MaxFlowKeys)
			return
		}
		settings = s.KeySettings(project, key, change)
	})
	if err != nil {
		return err
	}
	if _, err := update(ctx, e.store, func(tx *storage.Tx) (struct{}, error) {
		return struct{}{}, tx.PutFlowKey(project, key, storage.FlowKeySettings{Paused: settings.Paused, Pins: settings.Pins})
	}); err != nil {
		return err
	}
	e.disp.with(func(s *sched.Scheduler) []sched.Start {
		_, starts := s.ChangeKey(project, key, change, e.now())
		return starts
	})
	return nil
}

// WaitReason says why a pending message of a project has not started: the constraint
// its waitlist's head waits for (or that earlier deliveries of its key are ahead of it)
// and since when it waits. ok is false when the message is not in a waitlist.
func (e *Engine) WaitReason(ctx context.Context, project, messageID string) (reason string, since time.Time, ok bool, err error) {
	m, err := e.Message(ctx, project, messageID)
	if errors.Is(err, storage.ErrNotFound) {
		return "", time.Time{}, false, nil // delivered or cancelled meanwhile
	}
	if err != nil {
		return "", time.Time{}, false, err
	}
	e.disp.locked(func(s *sched.Scheduler) { reason, since, ok = s.WaitReason(storage.DueOf(m)) })
	return reason, since, ok, nil
}

// RunWaitReason says why a live run's next delivery has not started, if one of its
// messages waits in a flow-control waitlist.
func (e *Engine) RunWaitReason(ctx context.Context, project, runID string) (reason string, since time.Time, ok bool, err error) {
	dues, err := view(ctx, e.store, func(tx *storage.Tx) ([]storage.DueEntry, error) {
		ids, err := tx.RunMessages(project, runID)
		if err != nil {
			return nil, err
		}
		var dues []storage.DueEntry
		for _, id := range ids {
			m, err := tx.Message(project, id)
			if err == nil {
				dues = append(dues, storage.DueOf(m))
			} else if !errors.Is(err, storage.ErrNotFound) {
				return nil, err
			}
		}
		return dues, nil
	})
	if err != nil {
		return "", time.Time{}, false, err
	}
	e.disp.locked(func(s *sched.Scheduler) {
		for _, d := range dues {
			if reason, since, ok = s.WaitReason(d); ok {
				return
			}
		}
	})
	return reason, since, ok, nil
}

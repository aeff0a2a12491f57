package native

import (
	"errors"
	"fmt"
	"math"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// The gates after rateLimit (docs/protocol.md, "Controls"): debounce | batch hold an
// admitted event in a durable buffer whose durable deadline the flusher (flusher.go)
// fires; singleton decides, as the run is about to be created, whether it is skipped or
// replaces its scope's holder; throttle delays the created run's first delivery.

const (
	gateDebounce  = "debounce"
	gateBatch     = "batch"
	gateSingleton = "singleton"
	gateThrottle  = "throttle"
)

// payloadEvent is one event as the workflow endpoint receives it.
type payloadEvent = storage.BufferedEvent

// bufferTx holds an admitted event in d's debounce or batch buffer. It reports whether
// the event was held (false: d has neither gate, the caller starts a run). A batch that
// reaches maxSize starts its run here.
func (s *Service) bufferTx(n *delivery.NativeTx, project string, d *Workflow, ev payloadEvent) (EventRun, bool, error) {
	fc, now := &d.FlowControl, n.Now.UnixMilli()
	var gate, keyPath string
	switch {
	case fc.Debounce != nil:
		gate, keyPath = gateDebounce, fc.Debounce.Key
	case fc.Batch != nil:
		gate, keyPath = gateBatch, fc.Batch.Key
	default:
		return EventRun{}, false, nil
	}
	key := gateKey(d.Name, gate, s.keyValue(newKeyEvent(ev), keyPath))
	b, err := n.Tx.GateBuffer(project, key)
	if errors.Is(err, storage.ErrNotFound) {
		b, err = &storage.GateBuffer{Workflow: d.Name, Gate: gate, FirstAt: now}, nil
	}
	if err != nil {
		return EventRun{}, false, err
	}
	if b.Deadline != 0 && b.Deadline <= now {
		// The buffer is due and the flusher has not fired it yet: it fires now, and the
		// event starts the next buffer (it belongs to no burst or batch that has ended).
		if _, err := s.startTx(n, project, d, b.Events); err != nil {
			return EventRun{}, false, err
		}
		b = &storage.GateBuffer{Workflow: d.Name, Gate: gate, FirstAt: now}
	}
	b.Received++
	if gate == gateDebounce {
		g := fc.Debounce
		b.Events = []payloadEvent{ev} // the last event by receive order wins
		b.Deadline = flowctl.DebounceDeadline(b.FirstAt, now, g.PeriodMs, g.TimeoutMs)
		return EventRun{Workflow: d.Name, Debounced: true}, true, n.Tx.PutGateBuffer(project, key, b)
	}
	g := fc.Batch
	b.Events = append(b.Events, ev)
	b.Deadline = flowctl.BatchDeadline(b.FirstAt, g.TimeoutMs)
	if len(b.Events) < g.MaxSize {
		return EventRun{Workflow: d.Name, Batched: true}, true, n.Tx.PutGateBuffer(project, key, b)
	}
	if err := n.Tx.DeleteGateBuffer(project, key); err != nil {
		return EventRun{}, false, err
	}
	if _, err := s.startTx(n, project, d, b.Events); err != nil {
		return EventRun{}, false, err
	}
	return EventRun{Workflow: d.Name, Batched: true}, true, nil
}

// flushTx fires the buffer stored under key: it is removed and its run started (through
// singleton). A buffer whose workflow was removed meanwhile is dropped. It returns what
// became of the buffer.
func (s *Service) flushTx(n *delivery.NativeTx, project, key string) (EventRun, error) {
	b, err := n.Tx.GateBuffer(project, key)
	if err != nil {
		return EventRun{}, fmt.Errorf("gate buffer %q: %w", key, err)
	}
	if err := n.Tx.DeleteGateBuffer(project, key); err != nil {
		return EventRun{}, err
	}
	d, err := n.Tx.WorkflowDef(project, b.Workflow)
	if errors.Is(err, storage.ErrNotFound) {
		return EventRun{Workflow: b.Workflow, Dropped: true}, nil
	}
	if err != nil || len(b.Events) == 0 {
		return EventRun{}, err
	}
	return s.startTx(n, project, d, b.Events)
}

// startTx creates a run of d for events (the first is the payload's top level) after the
// singleton gate: with a live holder in the scope, mode skip answers skipped with the
// holder, mode cancel cancels the holder in this transaction and starts the new run. A
// throttle is not booked here: the run's first delivery carries its start gate, which the
// scheduler admits together with the run's concurrency (runPublication).
func (s *Service) startTx(n *delivery.NativeTx, project string, d *Workflow, events []payloadEvent) (EventRun, error) {
	var singletonKey string
	ke := newKeyEvent(events[0])
	if g := d.FlowControl.Singleton; g != nil {
		singletonKey = gateKey(d.Name, gateSingleton, s.keyValue(ke, g.Key))
		st, err := readGate(n.Tx, project, singletonKey)
		if err != nil {
			return EventRun{}, err
		}
		if st != nil && st.RunID != "" {
			run, err := n.Tx.Run(project, st.RunID)
			switch {
			case errors.Is(err, storage.ErrNotFound):
			case err != nil:
				return EventRun{}, err
			case run.Live() && g.Mode == flowctl.SingletonSkip:
				return EventRun{Workflow: d.Name, Skipped: true, HolderRunID: st.RunID}, nil
			case run.Live():
				if _, err := n.CancelRun(project, st.RunID); err != nil {
					return EventRun{}, fmt.Errorf("cancel singleton holder %q: %w", st.RunID, err)
				}
			}
		}
	}
	pub, err := runPublication(project, d, events, s.ids.New(runIDPrefix, n.Now), func(key string) string { return s.keyValue(ke, key) })
	if err != nil {
		return EventRun{}, err
	}
	pub.Init.FlowKeys = s.runKeys(d, ke) // shown on GET /runs/{id}
	if pub.Init.CancelKeys, err = s.indexCancelTx(n.Tx, project, d, pub.Message.RunID, events[0], n.Now.UnixMilli()); err != nil {
		return EventRun{}, fmt.Errorf("workflow %q: %w", d.Name, err)
	}
	pub.Init.PriorityShiftMs = s.priorityShiftMs(d, ke)
	res, err := n.StartRun(pub)
	if err != nil {
		return EventRun{}, fmt.Errorf("workflow %q: %w", d.Name, err)
	}
	if res.Deduplicated { // a fresh random run id cannot be live: a broken invariant
		return EventRun{}, fmt.Errorf("workflow %q: run id %q already live", d.Name, pub.Message.RunID)
	}
	if singletonKey != "" {
		// The holder record matters while its run may be live; it is replaced by the next
		// run of the scope, swept by the engine's retention sweep once its run has ended,
		// and removed with the workflow.
		st := gateState{RunID: pub.Message.RunID, ExpiresAt: math.MaxInt64}
		if err := n.Tx.PutGate(project, singletonKey, &st); err != nil {
			return EventRun{}, err
		}
	}
	return EventRun{Workflow: d.Name, RunID: pub.Message.RunID}, nil
}

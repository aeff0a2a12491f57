package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/duraton/duraton/delivery/internal/aimeter"
	"github.com/duraton/duraton/delivery/internal/sched"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// Storage-failure policy of an attempt: nothing is dropped on an error. An outcome that
// cannot be recorded is recorded again after recordBackoff (a few times); if it still
// cannot, the delivery goes back to the scheduler and is sent again after
// storageRetryDelay, as is one whose message could not be read or whose rate start could
// not be made durable.
var recordBackoff = []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second}

const storageRetryDelay = time.Second

// attempt sends one started delivery and records its outcome. It runs on an attempt
// worker (workers.go) and reports the start back to the dispatcher exactly once. When
// that report starts deliveries (the run's next step), it may return one of them for
// the worker to attempt next, counted in e.attempts already.
func (e *Engine) attempt(ctx context.Context, st sched.Start) (next sched.Start, ok bool) {
	defer e.attempts.Done()
	entry := st.Entry
	m, body, err := e.loadDelivery(entry)
	switch {
	case errors.Is(err, storage.ErrNotFound) || (err == nil && m.DueAt != entry.DueAt):
		// Cancelled, its run ended, or already rescheduled by an earlier attempt.
		e.disp.drop(st)
		return
	case err != nil:
		e.log.Error("read delivery", "message_id", entry.MessageID, "project", entry.Project, "err", err)
		e.disp.retry(st, storageRetryDelay, false)
		return
	}
	if m.Kind == storage.KindWaitTimeout {
		follow, err := e.fireWaitTimeout(m)
		if err != nil {
			e.log.Error("fire wait timeout", "run_id", m.RunID, "event_id", m.EventID, "err", err)
			e.disp.retry(st, storageRetryDelay, false)
			return
		}
		e.disp.finish(st, follow)
		return
	}
	if st.RateStart != 0 {
		// The start counts from when the request leaves, not from its admission, and it
		// is durable before the request leaves, so a crash cannot turn into a burst.
		e.disp.locked(func(s *sched.Scheduler) { s.MoveRateStart(&st.Admission, e.now()) })
		if _, err := update(ctx, e.store, func(tx *storage.Tx) (struct{}, error) {
			return struct{}{}, tx.AppendRateStart(entry.Project, entry.FlowKey, st.RateStart, int64(st.RatePeriod))
		}); err != nil {
			e.log.Error("record rate start", "project", entry.Project, "flow_key", entry.FlowKey, "err", err)
			e.disp.retry(st, storageRetryDelay, false)
			return
		}
	}
	if st.GateKey != "" {
		// The run's start is booked in its gate: durable before the request leaves, so a
		// restart cannot turn into a burst. The delivery's retries are not starts.
		if err := e.bookStart(ctx, entry.Project, st.GateKey, st.GateTAT); err != nil {
			e.log.Error("record start gate", "project", entry.Project, "message_id", entry.MessageID, "err", err)
			e.disp.retry(st, storageRetryDelay, false)
			return
		}
		unGated := *m
		unGated.StartGate = nil
		m = &unGated
	}
	if st.TokenKey != "" {
		// The start's tokenThrottle reservation, durable before the request leaves
		// (internal/aimeter/tokens.go); the delivery's retries are not starts.
		if err := e.bookTokens(ctx, m, st.TokenKey, st.TokenReserve); err != nil {
			e.log.Error("record token reservation", "project", entry.Project, "message_id", entry.MessageID, "err", err)
			e.disp.retry(st, storageRetryDelay, false)
			return
		}
		unGated := *m
		unGated.TokenGate = nil
		m = &unGated
	}
	if h := e.cfg.Hooks.Woken; h != nil && !st.WokenAt.IsZero() {
		h(entry.Project, entry.FlowKey, e.now().Sub(st.WokenAt))
	}
	var stopped *Outcome
	ai := aimeter.IsCall(m)
	if ai {
		if stopped, err = e.capOutcome(m); err != nil { // ai.go
			e.log.Error("read run for its ai cap", "run_id", m.RunID, "project", m.Project, "err", err)
			e.disp.retry(st, storageRetryDelay, false)
			return
		}
	}
	var out Outcome
	if stopped != nil {
		out = *stopped
	} else {
		var fl *flight
		if isWorkflowDelivery(m) {
			fl = e.flights.begin(m) // early.go
		}
		sent := e.now()
		out = e.send(ctx, m, body, sent)
		e.cfg.Observer.Attempt(verdictLabel(out.Verdict), e.now().Sub(sent))
		if e.cfg.Tracer != nil && m.RunID != "" {
			e.traceAttempt(m, sent, &out) // trace.go
		}
		if fl != nil && e.flights.end(fl) {
			// Its outcome was written with the step it published: the answer only
			// frees its slot.
			return e.keep(e.disp.finishKeep(st, nil))
		}
		if ai {
			e.meterAI(m, &out)
		}
	}
	if ctx.Err() != nil {
		// Shutting down: the answer may be incomplete. The due entry stays, so the
		// message is sent again after restart without spending a retry.
		e.disp.finish(st, nil)
		return
	}
	if out.Verdict == Delivered && m.DetectTrigger && !answeredBySDK(out.Response.Header) {
		out.Verdict, out.Fault, out.Response.Error, out.inline = Final, FaultDestination, nonWorkflowDestination, nil
	}
	if out.Verdict == Delivered && len(m.Header[wire.HeaderWorkflowUnknownSdk]) > 0 {
		if waits, err := e.awaitsSDK(m); err != nil {
			out.Verdict, out.Response.Error = Retryable, "reading the run: "+err.Error()
		} else if waits {
			out.Verdict, out.Fault, out.Response.Error, out.inline = Final, FaultDestination, notAdoptedBySDK, nil
		}
	}
	if out.inline != nil {
		out = e.prepareInline(m, out, e.now()) // inline.go
	}
	follow, err := e.recordWithRetry(ctx, m, out)
	switch {
	case err == nil:
		return e.keep(e.disp.finishKeep(st, follow))
	case errors.Is(err, storage.ErrConflict):
		e.disp.finish(st, nil) // cancelled or moved on meanwhile: nothing to record
	case ctx.Err() != nil:
		e.disp.finish(st, nil) // shutting down: redelivered after restart
	default:
		e.log.Error("record outcome: delivery will be sent again", "message_id", m.ID, "project", m.Project, "err", err)
		e.disp.retry(st, storageRetryDelay, true)
	}
	return
}

// keep counts a start that the finishing attempt's worker runs next.
func (e *Engine) keep(st sched.Start, ok bool) (sched.Start, bool) {
	if ok {
		e.attempts.Add(1)
	}
	return st, ok
}

// loadDelivery reads what an attempt sends: the message (unless the entry carries it, in
// which case only its due entry is checked) and, for a workflow step, its history.
func (e *Engine) loadDelivery(entry storage.DueEntry) (*Message, []byte, error) {
	m := entry.Msg
	var body []byte
	err := e.store.View(func(tx *storage.Tx) error {
		if m == nil {
			var err error
			if m, err = tx.Message(entry.Project, entry.MessageID); err != nil {
				return err
			}
		} else if !tx.HasDue(entry) {
			return storage.ErrNotFound
		}
		body = m.Body
		if m.HistoryLen > 0 {
			var err error
			body, err = historyBodyTx(tx, m.Project, m.RunID, m.HistoryLen) // historybody.go
			return err
		}
		return nil
	})
	return m, body, err
}

// recordWithRetry records an outcome, trying again after a storage error.
func (e *Engine) recordWithRetry(ctx context.Context, m *Message, out Outcome) ([]storage.DueEntry, error) {
	for i := 0; ; i++ {
		fx, err := e.record(m, out, e.now())
		if err == nil {
			e.disp.apply(effects{forget: fx.forget, tokens: fx.tokens})
			return fx.add, nil
		}
		if refused := (*inlineRefusedError)(nil); errors.As(err, &refused) {
			// The run cannot take the answer's steps: the delivery fails for good, which
			// the next round records. Not a storage error: no backoff, none spent.
			out = refusedInline(out, refused.err)
			i--
			continue
		}
		if errors.Is(err, storage.ErrConflict) || i == len(recordBackoff) {
			return nil, err
		}
		e.log.Warn("record outcome failed, retrying", "message_id", m.ID, "project", m.Project, "attempt", i+1, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(recordBackoff[i]):
		}
	}
}

// bookStart stores a start gate's state after an admitted start: its GCRA at tat, kept
// until the gate's full burst is back. A later booking only moves tat forward, so a
// stale write never lowers it.
//
// The message keeps its gate until its outcome is recorded: a delivery sent again after
// a crash passes the gate again, which may delay it but never exceeds the pace.
func (e *Engine) bookStart(ctx context.Context, project, key string, tat int64) error {
	_, err := update(ctx, e.store, func(tx *storage.Tx) (struct{}, error) {
		old, err := tx.Gate(project, key)
		switch {
		case errors.Is(err, storage.ErrNotFound):
		case err != nil:
			return struct{}{}, err
		case old.GCRA.TAT >= tat:
			return struct{}{}, nil
		}
		st := storage.GateState{GCRA: flowctl.GCRA{TAT: tat}, ExpiresAt: time.Unix(0, tat).UnixMilli() + 1}
		return struct{}{}, tx.PutGate(project, key, &st)
	})
	return err
}

package delivery

import (
	"context"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/duraton/duraton/delivery/internal/aimeter"
	"github.com/duraton/duraton/delivery/retrydelay"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// outcomePlan is what an attempt's outcome writes, decided before the transaction:
// the message's next state, its log event, its dead letter, and the callback and
// failure-callback messages. The transaction only reads it (it may run twice).
type outcomePlan struct {
	next      Message // the message after the attempt (state, retried, due time)
	log       storage.LogEvent
	dlq       *storage.DLQEntry
	callbacks []*Message // callback and failure callback, when wanted
	cbLogs    []storage.LogEvent
}

func (e *Engine) planOutcome(m *Message, out Outcome, now time.Time) outcomePlan {
	p := outcomePlan{next: *m, log: *stampLog(e.ids, now, storage.LogEvent{
		MessageID: m.ID, URL: m.URL, Queue: m.Queue, Labels: m.Labels, Retried: m.Retried,
		ScheduleID: m.ScheduleID, TopicName: m.TopicName, EndpointName: m.EndpointName})}
	if out.Verdict != Delivered {
		p.log.Error = out.Response.Error
		p.log.ResponseStatus = out.Response.Status
		p.log.ResponseHeader = out.Response.Header
		p.log.ResponseBody = out.Response.Body
	}
	var failure *Message
	retrying := false
	switch {
	case out.Verdict == Delivered:
		p.log.State = storage.StateDelivered
		p.log.ResponseStatus = out.Response.Status
	case out.Verdict == Retryable && m.Retried < m.Retries:
		delay := out.RetryAfter
		if delay <= 0 {
			delay = e.retryDelay(m)
		}
		retrying = true
		p.next.Retried++
		p.next.State = storage.StateRetry
		p.next.DueAt = now.Add(delay).UnixNano()
		p.log.State = storage.StateError
		p.log.NextDeliveryTime = now.Add(delay).UnixMilli()
	default:
		p.log.State = storage.StateFailed
		p.next.State = storage.StateFailed
		// A workflow's outbound call has no dead letter of its own: its last callback
		// tells the workflow, which decides.
		// A budget stop (ai.go) fails the run itself: dead letter and the run's failure
		// function, no callback to the workflow.
		dlqID := ""
		if m.CallType != CallToCallback || out.budget != nil {
			dlqID = e.ids.New(storage.PrefixDLQ, now)
			p.dlq = &storage.DLQEntry{DLQID: dlqID, FailedAt: now.UnixMilli(), Message: p.next, Response: out.Response}
		}
		spec := m.FailureCallback
		if out.budget != nil {
			spec = out.budget.failure
		}
		if spec != nil {
			failure = e.callbackMessage(m, spec, storage.KindFailureCallback, callbackPayloadFor(m, out, dlqID), now)
		}
	}
	// A workflow's call reports to the workflow once, after its last attempt (as QStash
	// does: the SDK would count each intermediate callback as a delivery of the route);
	// a plain message's callback reports every attempt.
	var cb *Message
	if out.budget == nil && !(retrying && m.CallType == CallToCallback) {
		cb = e.callbackOf(m, out, now)
	}
	if cb != nil && out.AI != nil {
		cb.AIUsage = out.AI // for the callback's history entry
	}
	for _, cb := range []*Message{cb, failure} {
		if cb != nil {
			p.callbacks = append(p.callbacks, cb)
			p.cbLogs = append(p.cbLogs, *e.createdLog(cb, now))
		}
	}
	return p
}

// callbackOf is the callback message reporting an attempt of m, if m asked for one.
func (e *Engine) callbackOf(m *Message, out Outcome, now time.Time) *Message {
	if m.Callback == nil {
		return nil
	}
	return e.callbackMessage(m, m.Callback, storage.KindCallback, callbackPayloadFor(m, out, ""), now)
}

// record writes an attempt's outcome in one transaction: the message's new state, its
// next due entry or dead letter, the callback and failure-callback messages, the log
// events, and for workflow messages what the run makes of it (through the runHooks
// seam). It returns the effects for the scheduler.
//
// The transaction is compare-and-set on the message's due entry: if the message was
// cancelled or moved on meanwhile, nothing is written (ErrConflict).
func (e *Engine) record(m *Message, out Outcome, now time.Time) (effects, error) {
	plan := e.planOutcome(m, out, now)
	fx, err := update(context.Background(), e.store, func(tx *storage.Tx) (effects, error) {
		return e.recordTx(tx, m, out, &plan, now)
	})
	if err == nil {
		e.observeOutcome(m, plan.log.State, fx)
	}
	return fx, err
}

// observeOutcome reports a committed outcome to the hooks and metrics.
func (e *Engine) observeOutcome(m *Message, state string, fx effects) {
	if e.cfg.Hooks.Recorded != nil {
		e.cfg.Hooks.Recorded(m.Project, m.ID, state)
	}
	e.observeRecorded(state, fx)
	if fx.inlined > 0 {
		e.cfg.Observer.Published(ObsWorkflow, fx.inlined)
	}
}

// recordTx is record's transaction: it only reads m, out and plan (it may run twice).
func (e *Engine) recordTx(tx *storage.Tx, m *Message, out Outcome, plan *outcomePlan, now time.Time) (effects, error) {
	var fx effects
	// The due key names the message and its due time, and every state change moves
	// or removes it: its presence is the compare-and-set.
	if !tx.HasDue(storage.DueOf(m)) {
		return fx, storage.ErrConflict
	}
	if out.inline != nil {
		// The steps first, as when the SDK published them before answering.
		inFx, err := e.inlineTx(tx, m, out.inline, now) // inline.go
		if err != nil {
			return fx, err
		}
		fx.merge(inFx)
	}
	if err := tx.DeleteDue(storage.DueOf(m)); err != nil {
		return fx, err
	}
	if plan.log.State == storage.StateError {
		next := plan.next
		if err := tx.PutMessage(&next); err != nil {
			return fx, err
		}
		if err := tx.PutDue(storage.DueOf(&next)); err != nil {
			return fx, err
		}
		fx.add = append(fx.add, storage.DueWith(&next))
	} else {
		if err := tx.DeleteMessage(m.Project, m.ID); err != nil {
			return fx, err
		}
		if m.RunID != "" {
			if err := tx.UnlinkRunMessage(m.Project, m.RunID, m.ID); err != nil {
				return fx, err
			}
			if err := e.hooks.settled(tx, m, plan.log.State); err != nil {
				return fx, err
			}
		}
	}
	dlqID := ""
	if plan.dlq != nil {
		dlqID = plan.dlq.DLQID
		if err := tx.PutDLQ(m.Project, plan.dlq); err != nil {
			return fx, err
		}
	}
	logEv := plan.log
	if err := tx.AppendLog(m.Project, &logEv); err != nil {
		return fx, err
	}
	if out.AI != nil && m.RunID != "" {
		adj, err := aimeter.AddRunUsageTx(tx, m.Project, m.RunID, *out.AI, now)
		if err != nil {
			return fx, err
		}
		if adj != nil {
			fx.tokens = append(fx.tokens, *adj)
		}
	}
	if plan.log.State == storage.StateFailed && (isWorkflowDelivery(m) || out.budget != nil) {
		runFx, err := e.hooks.failed(tx, m, out, dlqID, now)
		if err != nil {
			return fx, err
		}
		fx.merge(runFx)
	}
	for i, tmpl := range plan.callbacks {
		cb := *tmpl // the plan is read-only: this run of the transaction works on a copy
		if cb.RunID != "" {
			ok, err := e.hooks.bindCallback(tx, &cb, m, out, dlqID, now)
			if err != nil {
				return fx, err
			}
			if !ok {
				continue
			}
		}
		cbLog := plan.cbLogs[i]
		if err := putNew(tx, &cb, &cbLog); err != nil {
			return fx, err
		}
		fx.add = append(fx.add, storage.DueWith(&cb))
	}
	return fx, nil
}

func (e *Engine) retryDelay(m *storage.Message) time.Duration {
	if m.RetryDelay == "" {
		return retrydelay.Backoff(m.Retried)
	}
	expr, err := retrydelay.Parse(m.RetryDelay)
	if err != nil {
		return retrydelay.Backoff(m.Retried) // validated at publish; only a schema change gets here
	}
	return retrydelay.Delay(expr, m.Retried)
}

// putNew stores a newly created message with its due entry and CREATED log event.
func putNew(tx *storage.Tx, m *storage.Message, created *storage.LogEvent) error {
	if err := tx.PutMessage(m); err != nil {
		return err
	}
	if err := tx.PutDue(storage.DueOf(m)); err != nil {
		return err
	}
	return tx.AppendLog(m.Project, created)
}

func (e *Engine) createdLog(m *storage.Message, now time.Time) *storage.LogEvent {
	return stampLog(e.ids, now, storage.LogEvent{
		State:     storage.StateCreated,
		MessageID: m.ID, URL: m.URL, Queue: m.Queue, Labels: m.Labels, NextDeliveryTime: m.DueAt / int64(time.Millisecond),
		ScheduleID: m.ScheduleID, TopicName: m.TopicName, EndpointName: m.EndpointName,
	})
}

// stampLog gives a log event its id and time: the time the id carries, so that logs,
// keyed by id and listed newest first, are also in time order.
func stampLog(ids *storage.IDGen, now time.Time, ev storage.LogEvent) *storage.LogEvent {
	id, at := ids.NewAt(storage.PrefixLog, now)
	ev.ID, ev.Time = id, at.UnixMilli()
	return &ev
}

// callbackMessage builds the message that reports an attempt of src to a callback URL.
func (e *Engine) callbackMessage(src *storage.Message, spec *storage.CallbackSpec, kind string, payload wire.CallbackPayload, now time.Time) *storage.Message {
	header := make(map[string][]string, len(spec.Header)+1)
	for k, v := range spec.Header {
		header[k] = v
	}
	if _, ok := header["Content-Type"]; !ok {
		header["Content-Type"] = []string{"application/json"}
	}
	due := now.Add(time.Duration(spec.DelayMs) * time.Millisecond)
	return &storage.Message{
		ID: e.ids.New(storage.PrefixMessage, now), Project: src.Project, Kind: kind,
		URL: spec.URL, Method: spec.Method, Header: header, Body: wire.MustCompactJSON(payload),
		RunID: spec.RunID, CallType: spec.CallType,
		Labels: src.Labels, CallerIP: src.CallerIP, Hops: src.Hops,
		CreatedAt: now.UnixMilli(), NotBefore: due.UnixMilli(), DueAt: due.UnixNano(),
		State: storage.StateCreated, Retries: spec.Retries, RetryDelay: spec.RetryDelay,
		TimeoutMs: spec.TimeoutMs, FlowControl: spec.FlowControl, SourceMessageID: src.ID,
		Redact: callbackRedaction(src.Redact),
	}
}

func callbackPayloadFor(m *storage.Message, out Outcome, dlqID string) wire.CallbackPayload {
	header := http.Header{}
	for k, v := range out.Response.Header {
		header[http.CanonicalHeaderKey(k)] = v
	}
	p := wire.CallbackPayload{
		Status: out.Response.Status, Header: header,
		Body:    base64.StdEncoding.EncodeToString(out.Response.Body),
		Retried: m.Retried, MaxRetries: m.Retries, DLQID: dlqID,
		SourceMessageID: m.ID, URL: m.URL, Method: m.Method,
		SourceHeader: m.Header, SourceBody: base64.StdEncoding.EncodeToString(m.Body),
		NotBefore: m.NotBefore, CreatedAt: m.CreatedAt, CallerIP: m.CallerIP,
		ScheduleID: m.ScheduleID, TopicName: m.TopicName, EndpointName: m.EndpointName,
		Error: out.Response.Error,
	}
	if p.SourceHeader == nil {
		p.SourceHeader = map[string][]string{}
	}
	if isCall(m) {
		p.SourceHeader = withoutCredentials(p.SourceHeader) // redact.go
	}
	return p
}

package delivery

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/duraton/duraton/delivery/retrydelay"
	"github.com/duraton/duraton/storage"
)

// record writes an attempt's outcome in one transaction: the message's new state, its
// next due entry or dead letter, the callback and failure-callback messages, the log
// events, and for workflow messages the run's history and state. It returns the due
// entries it created, for the dispatcher.
//
// The transaction is compare-and-set on the message's due entry: if the message was
// cancelled or moved on meanwhile, nothing is written (ErrConflict).
func (e *Engine) record(m *storage.Message, out Outcome, now time.Time) ([]storage.DueEntry, error) {
	// Everything random or clock-derived is made before the transaction, which may run
	// twice under group commit.
	next := *m
	var (
		dueEntries []storage.DueEntry
		dlq        *storage.DLQEntry
		callback   *storage.Message
		failure    *storage.Message
		logEv      = &storage.LogEvent{ID: e.ids.New(storage.PrefixLog, now), Time: now.UnixMilli(), MessageID: m.ID, URL: m.URL, Queue: m.Queue, Labels: m.Labels, Retried: m.Retried}
		ids        = e.newInternalIDs(now)
		cbLogs     = [2]*storage.LogEvent{}
	)
	if out.Verdict != Delivered {
		logEv.Error = out.Response.Error
		logEv.ResponseStatus = out.Response.Status
		logEv.ResponseHeader = out.Response.Header
		logEv.ResponseBody = out.Response.Body
	}
	switch {
	case out.Verdict == Delivered:
		logEv.State = storage.StateDelivered
		logEv.ResponseStatus = out.Response.Status
	case out.Verdict == Retryable && m.Retried < m.Retries:
		delay := out.RetryAfter
		if delay <= 0 {
			delay = e.retryDelay(m)
		}
		next.Retried++
		next.State = storage.StateRetry
		next.DueAt = now.Add(delay).UnixNano()
		logEv.State = storage.StateError
		logEv.NextDeliveryTime = now.Add(delay).UnixMilli()
		dueEntries = append(dueEntries, storage.DueWith(&next))
	default:
		logEv.State = storage.StateFailed
		next.State = storage.StateFailed
		// A workflow's outbound call has no dead letter of its own: its last callback
		// tells the workflow, which decides.
		if m.CallType != CallToCallback {
			dlq = &storage.DLQEntry{DLQID: e.ids.New(storage.PrefixDLQ, now), FailedAt: now.UnixMilli(), Message: next, Response: out.Response}
		}
		if spec := m.FailureCallback; spec != nil {
			dlqID := ""
			if dlq != nil {
				dlqID = dlq.DLQID
			}
			failure = e.callbackMessage(m, spec, storage.KindFailureCallback, callbackPayloadFor(m, out, dlqID), now)
		}
	}
	if spec := m.Callback; spec != nil {
		callback = e.callbackMessage(m, spec, storage.KindCallback, callbackPayloadFor(m, out, ""), now)
	}
	for i, nm := range []*storage.Message{callback, failure} {
		if nm != nil {
			cbLogs[i] = e.createdLog(nm, now)
		}
	}

	err := e.store.Update(func(tx *storage.Tx) error {
		dueEntries = dueEntries[:min(len(dueEntries), 1)]
		// The due key names the message and its due time, and every state change moves
		// or removes it: its presence is the compare-and-set.
		if !tx.HasDue(storage.DueOf(m)) {
			return storage.ErrConflict
		}
		if err := tx.DeleteDue(storage.DueOf(m)); err != nil {
			return err
		}
		if logEv.State == storage.StateError {
			if err := tx.PutMessage(&next); err != nil {
				return err
			}
			if err := tx.PutDue(storage.DueOf(&next)); err != nil {
				return err
			}
		} else {
			if err := tx.DeleteMessage(m.Project, m.ID); err != nil {
				return err
			}
			if m.RunID != "" {
				if err := tx.UnlinkRunMessage(m.Project, m.RunID, m.ID); err != nil {
					return err
				}
				if err := e.workflowSettledTx(tx, m, logEv.State); err != nil {
					return err
				}
			}
		}
		if dlq != nil {
			if err := tx.PutDLQ(m.Project, dlq); err != nil {
				return err
			}
		}
		if err := tx.AppendLog(m.Project, logEv); err != nil {
			return err
		}
		if logEv.State == storage.StateFailed && isWorkflowDelivery(m) {
			dlqID := ""
			if dlq != nil {
				dlqID = dlq.DLQID
			}
			_, resume, err := e.workflowFailureTx(tx, m, dlqID, ids, now)
			if err != nil {
				return err
			}
			if resume != nil {
				dueEntries = append(dueEntries, *resume)
			}
		}
		for i, nm := range []*storage.Message{callback, failure} {
			if nm == nil {
				continue
			}
			if nm.RunID != "" {
				if nm.Kind == storage.KindFailureCallback && dlq != nil {
					p := callbackPayloadFor(m, out, dlq.DLQID)
					workflowFailureFields(&p, tx, m)
					nm.Body = compactJSON(p)
				}
				ok, err := e.workflowCallbackTx(tx, nm, m, now)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
			}
			if err := putNew(tx, nm, cbLogs[i]); err != nil {
				return err
			}
			dueEntries = append(dueEntries, storage.DueWith(nm))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return dueEntries, nil
}

// workflowSettledTx updates a run when one of its messages ends: the failure function's
// state when it was the failure callback.
func (e *Engine) workflowSettledTx(tx *storage.Tx, m *Message, state string) error {
	if m.Kind != storage.KindFailureCallback {
		return nil
	}
	run, err := tx.Run(m.Project, m.RunID)
	if err != nil || run.FailureMessageID != m.ID {
		return nil
	}
	run.FailureState = callbackFail
	if state == storage.StateDelivered {
		run.FailureState = callbackSuccess
	}
	return tx.PutRun(m.Project, run)
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
	return &storage.LogEvent{
		ID: e.ids.New(storage.PrefixLog, now), Time: now.UnixMilli(), State: storage.StateCreated,
		MessageID: m.ID, URL: m.URL, Queue: m.Queue, Labels: m.Labels, NextDeliveryTime: m.DueAt / int64(time.Millisecond),
	}
}

// callbackMessage builds the message that reports an attempt of src to a callback URL.
func (e *Engine) callbackMessage(src *storage.Message, spec *storage.CallbackSpec, kind string, payload callbackPayload, now time.Time) *storage.Message {
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
		URL: spec.URL, Method: spec.Method, Header: header, Body: compactJSON(payload),
		RunID: spec.RunID, CallType: spec.CallType,
		Labels: src.Labels, CallerIP: src.CallerIP,
		CreatedAt: now.UnixMilli(), NotBefore: due.UnixMilli(), DueAt: due.UnixNano(),
		State: storage.StateCreated, Retries: spec.Retries, RetryDelay: spec.RetryDelay,
		TimeoutMs: spec.TimeoutMs, FlowControl: spec.FlowControl, SourceMessageID: src.ID,
	}
}

// callbackPayload is the JSON body of callbacks (protocol §4.4) and failure callbacks
// (§4.5). Header maps use Go-canonical names and array values; bodies are standard base64.
type callbackPayload struct {
	Status          int                 `json:"status"`
	Header          map[string][]string `json:"header"`
	Body            string              `json:"body"`
	Retried         int                 `json:"retried"`
	MaxRetries      int                 `json:"maxRetries"`
	DLQID           string              `json:"dlqId,omitempty"`
	SourceMessageID string              `json:"sourceMessageId"`
	URL             string              `json:"url"`
	Method          string              `json:"method"`
	SourceHeader    map[string][]string `json:"sourceHeader"`
	SourceBody      string              `json:"sourceBody"`
	NotBefore       int64               `json:"notBefore"`
	CreatedAt       int64               `json:"createdAt"`
	ScheduleID      string              `json:"scheduleId"`
	CallerIP        string              `json:"callerIP"`
	TopicName       string              `json:"topicName"`
	EndpointName    string              `json:"endpointName"`
	Error           string              `json:"error,omitempty"`
	// Workflow failure callbacks only (§4.5).
	WorkflowRunID     string `json:"workflowRunId,omitempty"`
	WorkflowCreatedAt int64  `json:"workflowCreatedAt,omitempty"`
}

func callbackPayloadFor(m *storage.Message, out Outcome, dlqID string) callbackPayload {
	header := http.Header{}
	for k, v := range out.Response.Header {
		header[http.CanonicalHeaderKey(k)] = v
	}
	p := callbackPayload{
		Status: out.Response.Status, Header: header,
		Body:    base64.StdEncoding.EncodeToString(out.Response.Body),
		Retried: m.Retried, MaxRetries: m.Retries, DLQID: dlqID,
		SourceMessageID: m.ID, URL: m.URL, Method: m.Method,
		SourceHeader: m.Header, SourceBody: base64.StdEncoding.EncodeToString(m.Body),
		NotBefore: m.NotBefore, CreatedAt: m.CreatedAt, CallerIP: m.CallerIP,
		Error: out.Response.Error,
	}
	if p.SourceHeader == nil {
		p.SourceHeader = map[string][]string{}
	}
	return p
}

// compactJSON encodes v without HTML escaping and without a trailing newline, so bodies
// re-serialised by JavaScript frameworks still match their signature (protocol §7).
func compactJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("delivery: encode callback payload: " + err.Error()) // only plain data types
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

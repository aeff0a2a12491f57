package delivery

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// Verdict says what an attempt's answer means for the message.
type Verdict int

const (
	// Delivered: the endpoint answered 2xx.
	Delivered Verdict = iota
	// Retryable: the attempt failed and may be tried again (if retries remain).
	Retryable
	// Final: the endpoint refused for good (489 + Upstash-NonRetryable-Error: true).
	Final
)

// Fault says whose fault a failed attempt is.
type Fault string

const (
	FaultNone        Fault = ""
	FaultDestination Fault = "destination" // the endpoint answered non-2xx or could not be reached
	FaultInternal    Fault = "internal"    // Duraton could not build or sign the request
)

// Outcome is the classified result of one attempt. Only the retry policy reads it.
type Outcome struct {
	Verdict    Verdict
	Fault      Fault
	Response   storage.Response
	RetryAfter time.Duration // > 0 when the endpoint asked for a specific delay (429)
}

// attempt sends one delivery of entry and records its outcome. It runs in its own goroutine.
func (e *Engine) attempt(ctx context.Context, entry storage.DueEntry, adm admission) {
	defer e.attempts.Done()
	var follow []storage.DueEntry
	defer func() { e.disp.release(entry, adm, follow) }()

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
			h, err := tx.History(m.Project, m.RunID, m.HistoryLen)
			if err != nil {
				return err
			}
			body = historyBody(h)
		}
		return nil
	})
	if err != nil || m.DueAt != entry.DueAt {
		// Cancelled, or already rescheduled by an earlier attempt: nothing to send.
		return
	}
	if m.Kind == storage.KindWaitTimeout {
		follow = e.fireWaitTimeout(m)
		return
	}
	if adm.rateStart != 0 {
		// The start counts from when the request leaves, not from its admission: the
		// window moves its start to now. And it counts after a restart too: it is made
		// durable before the request leaves, so a crash cannot turn into a burst.
		adm.rateStart = e.disp.moveRateStart(adm, e.now())
		if err := e.store.Update(func(tx *storage.Tx) error {
			return tx.AppendRateStart(entry.Project, entry.FlowKey, adm.rateStart, int64(adm.ratePeriod))
		}); err != nil {
			e.log.Error("record rate start", "project", entry.Project, "flow_key", entry.FlowKey, "err", err)
		}
	}
	if h := e.cfg.Hooks.Woken; h != nil && !adm.wokenAt.IsZero() {
		h(entry.Project, entry.FlowKey, e.now().Sub(adm.wokenAt))
	}
	started := e.now()
	out := e.send(ctx, m, body, started)
	if ctx.Err() != nil {
		// Shutting down: the answer may be incomplete. The due entry stays, so the
		// message is sent again after restart without spending a retry.
		return
	}
	if out.Verdict == Delivered && m.DetectTrigger && !answeredBySDK(out.Response.Header) {
		out.Verdict, out.Fault, out.Response.Error = Final, FaultDestination, nonWorkflowDestination
	}
	follow, err = e.record(m, out, e.now())
	if err != nil && !errors.Is(err, storage.ErrConflict) {
		e.log.Error("record outcome", "message_id", m.ID, "project", m.Project, "err", err)
	}
}

// send makes one HTTP attempt for m and classifies the answer.
func (e *Engine) send(ctx context.Context, m *storage.Message, body []byte, now time.Time) Outcome {
	key, err := e.keys.current(m.Project)
	if err != nil {
		return Outcome{Verdict: Retryable, Fault: FaultInternal, Response: storage.Response{Error: "signing key unavailable"}}
	}
	timeout := e.cfg.DefaultTimeout
	if m.TimeoutMs > 0 {
		timeout = time.Duration(m.TimeoutMs) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, m.Method, m.URL, bytes.NewReader(body))
	if err != nil {
		return Outcome{Verdict: Final, Fault: FaultDestination, Response: storage.Response{Error: "invalid request: " + err.Error()}}
	}
	for name, values := range m.Header {
		req.Header[name] = values
	}
	sig, err := wire.Sign(key, wire.NewClaims(m.URL, body, now, e.ids.New("jwt_", now)))
	if err != nil {
		return Outcome{Verdict: Retryable, Fault: FaultInternal, Response: storage.Response{Error: "signing failed"}}
	}
	req.Header.Set(wire.HeaderSignature, sig)
	req.Header.Set(wire.HeaderMessageID, m.ID)
	req.Header.Set(wire.HeaderRetried, strconv.Itoa(m.Retried))
	req.Header.Set(wire.HeaderUserAgent, wire.UserAgent)
	if fc := m.FlowControl; fc != nil {
		req.Header.Set(wire.HeaderFlowControlKey, fc.Key)
		req.Header.Set(wire.HeaderFlowControlValue, fc.Value())
	}

	resp, err := e.client.Do(req)
	if err != nil {
		return Outcome{Verdict: Retryable, Fault: FaultDestination, Response: storage.Response{Error: describeSendError(err)}}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, e.cfg.MaxResponseBytes))
	if err != nil && ctx.Err() != nil {
		return Outcome{Verdict: Retryable, Fault: FaultDestination, Response: storage.Response{Status: resp.StatusCode, Error: "timed out reading the response"}}
	}
	return classify(resp.StatusCode, resp.Header, answer, now)
}

// classify turns an endpoint's answer into an Outcome (protocol §4.3).
func classify(status int, header http.Header, body []byte, now time.Time) Outcome {
	kept := make(http.Header, len(header))
	for name, values := range header {
		if !wire.IsHopByHop(name) {
			kept[name] = values
		}
	}
	out := Outcome{Response: storage.Response{Status: status, Header: kept, Body: body}}
	switch {
	case status >= 200 && status < 300:
		out.Verdict = Delivered
	case status == 489 && header.Get(wire.HeaderNonRetryableError) == "true":
		out.Verdict, out.Fault = Final, FaultDestination
		out.Response.Error = "non-retryable error"
	default:
		out.Verdict, out.Fault = Retryable, FaultDestination
		out.Response.Error = "endpoint answered " + strconv.Itoa(status)
		if status == http.StatusTooManyRequests {
			out.RetryAfter = RetryAfter(header, now)
		}
	}
	return out
}

// describeSendError names what went wrong without echoing internal detail (addresses,
// resolver output) that could map another network (RELIABILITY.md §3.2).
func describeSendError(err error) string {
	var netErr net.Error
	var blocked *netguard.BlockedError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.As(err, &blocked):
		return "destination address is not allowed"
	default:
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return "connection failed"
		}
		return "request failed"
	}
}

package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/duraton/duraton/delivery/internal/h1"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/flowctl"
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
	FaultBudget      Fault = "budget"      // the run's AI cap did not let the call start (ai.go)
)

// Outcome is the classified result of one attempt. Only the retry policy reads it.
type Outcome struct {
	Verdict    Verdict
	Fault      Fault
	Response   storage.Response
	RetryAfter time.Duration // > 0 when the endpoint asked for a specific delay (429)
	// AI is the metered usage of an AI call's answer (ai.go).
	AI *flowctl.AIUsage
	// budget is set on the made-up outcome of an AI call its run's cap stopped.
	budget *budgetStop
	// inline is a delivered attempt's inline answer (inline.go).
	inline *inlineAnswer
}

// newTransport is the deliveries' SSRF-guarded HTTP client transport: plain http:// is
// sent by h1, in place and without net/http's per-connection goroutines (the hot path);
// https:// and what h1 does not do go to net/http's Transport. Both dial through the
// same guard.
func newTransport(p netguard.Policy) (http.RoundTripper, error) {
	const dialTimeout = 10 * time.Second
	return h1.New(h1.Config{
		Dial:                   netguard.NewDialer(p, dialTimeout).DialContext,
		Fallback:               netguard.NewTransport(p, dialTimeout),
		MaxIdlePerHost:         netguard.MaxIdleConnsPerHost,
		MaxIdle:                4 * netguard.MaxIdleConnsPerHost,
		IdleTimeout:            netguard.IdleConnTimeout,
		MaxResponseHeaderBytes: netguard.MaxResponseHeaderBytes,
	})
}

// userAgent is the User-Agent value of every delivery, shared (never modified).
var userAgent = []string{wire.UserAgent}

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
	// Sized once; the names set below are canonical already (TestSentHeaderNamesAreCanonical).
	h := make(http.Header, len(m.Header)+7)
	for name, values := range m.Header {
		if err := checkSendable(name, values); err != nil {
			// The transport would refuse it on every attempt: the message can never be
			// sent, so it fails for good (the API refuses such headers; a message stored
			// by a version that did not gets here).
			return Outcome{Verdict: Final, Fault: FaultInternal, Response: storage.Response{Error: "invalid request: " + err.Error()}}
		}
		h[name] = values
	}
	sig, err := wire.Sign(key, wire.NewClaims(m.URL, body, now, e.ids.New("jwt_", now)))
	if err != nil {
		return Outcome{Verdict: Retryable, Fault: FaultInternal, Response: storage.Response{Error: "signing failed"}}
	}
	// The single values share one array (each a full slice expression: an append to one
	// cannot reach the next).
	vals := make([]string, 0, 6)
	set := func(name, value string) {
		vals = append(vals, value)
		h[name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set(wire.HeaderSignature, sig)
	set(wire.HeaderMessageID, m.ID)
	set(wire.HeaderRetried, strconv.Itoa(m.Retried))
	h[wire.HeaderUserAgent] = userAgent
	set(wire.HeaderHops, strconv.Itoa(m.Hops+1))
	if fc := m.FlowControl; fc != nil {
		set(wire.HeaderFlowControlKey, fc.Key)
		set(wire.HeaderFlowControlValue, flowControlValue(fc))
	}
	if e.cfg.Tracer != nil && m.RunID != "" {
		h["Traceparent"] = []string{traceparent(m)} // trace.go
	}
	offer := e.offersInline(m)
	if offer {
		h[wire.HeaderInline] = e.inline.header
	}
	req.Header = h

	// The transport directly: http.Client would only copy the headers for redirects,
	// which are not followed (a 3xx is a failed attempt: docs/guarantees.md, "Delivery
	// semantics").
	resp, err := e.client.Transport.RoundTrip(req)
	if err != nil {
		e.logSendError(m, err) // senderr.go: the detail the tenant does not see
		return Outcome{Verdict: Retryable, Fault: FaultDestination, Response: storage.Response{Error: describeSendError(err)}}
	}
	defer resp.Body.Close()
	limit, inline := e.cfg.MaxResponseBytes, ""
	if offer && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if inline = resp.Header.Get(wire.HeaderInline); inline != "" {
			limit = e.inline.maxBytes + 1 // one more: a longer answer is refused, not cut
		}
	}
	answer, err := readAnswer(resp.Body, resp.ContentLength, limit)
	if err != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) { // the socket's timer may fire first
		return Outcome{Verdict: Retryable, Fault: FaultDestination, Response: storage.Response{Status: resp.StatusCode, Error: "timed out reading the response"}}
	}
	if err != nil {
		// Cut short (the connection closed before the declared length, a broken chunked
		// body): a partial answer is not used, and a 2xx is not a delivery, since a
		// workflow step's result would be lost. Sent again, as any failed attempt.
		out := classify(resp.StatusCode, resp.Header, nil, now)
		if out.Verdict == Delivered {
			out.Verdict, out.Fault, out.Response.Error = Retryable, FaultDestination, "reading the answer failed: it was cut short"
			if inline != "" {
				out.Response.Error = "reading the inline answer failed"
			}
		}
		return out
	}
	if inline == "" {
		return classify(resp.StatusCode, resp.Header, answer, now)
	}
	out := classify(resp.StatusCode, resp.Header, nil, now) // the answer is not the response to keep
	out.inline = &inlineAnswer{kind: inline, body: answer}
	if int64(len(answer)) > e.inline.maxBytes {
		return refusedInline(out, fmt.Errorf("the answer exceeds the offered %d bytes", e.inline.maxBytes))
	}
	if n := resp.Header.Get(wire.HeaderInlineSteps); n != "" && inline == wire.InlineEnd {
		steps, err := strconv.Atoi(n)
		if err != nil || steps <= 0 || steps > len(answer) {
			return refusedInline(out, fmt.Errorf("%s: want a length within the %d-byte answer, got %q", wire.HeaderInlineSteps, len(answer), n))
		}
		out.inline.steps, out.inline.body = answer[:steps], answer[steps:]
	}
	return out
}

// checkSendable applies the sender's rule (the one the API checks at publish) to one
// forwarded header.
func checkSendable(name string, values []string) error {
	if err := wire.CheckHeaderName(name); err != nil {
		return err
	}
	for _, v := range values {
		if err := wire.CheckHeaderValue(v); err != nil {
			return fmt.Errorf("header %s: %w", name, err)
		}
	}
	return nil
}

// readAnswer reads up to limit bytes of an answer of length n (-1: unknown): in one
// allocation when the length is known and within the limit, else as io.ReadAll does. A
// length of 0 is read as unknown: a Config.Transport's made-up response may leave it
// unset with a body.
func readAnswer(body io.Reader, n, limit int64) ([]byte, error) {
	if n <= 0 || n > limit {
		return io.ReadAll(io.LimitReader(body, limit))
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(body, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// classify turns an endpoint's answer into an Outcome (docs/protocol.md, "Deliveries").
func classify(status int, header http.Header, body []byte, now time.Time) Outcome {
	out := Outcome{Response: storage.Response{Status: status, Header: keptResponseHeader(header), Body: body}}
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
// resolver output) that could map another network (docs/operations.md, "Destinations
// (SSRF)"). A refused (blocked) address reads like a failed connection: otherwise a
// tenant could learn which internal names resolve to private addresses. The server log
// has the detail.
func describeSendError(err error) string {
	var netErr net.Error
	var blocked *netguard.BlockedError
	switch {
	case errors.As(err, &blocked):
		return "connection failed"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	default:
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return "connection failed"
		}
		return "request failed"
	}
}

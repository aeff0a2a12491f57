package sdk

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// stepMessage is one message a step publishes: a step object to the workflow URL (or,
// for a call, a request to a third party), with extra headers.
type stepMessage struct {
	destination string // default: the workflow URL
	body        any    // a step object (JSON-encoded) or raw []byte
	header      map[string]string
}

// batchHeader is a header name as a /v2/batch entry carries it: lower case, as the
// official SDK writes it.
func batchHeader(name string) string { return strings.ToLower(name) }

// nestedHeader is a header of a nested message (prefix wire.PrefixCallback or
// wire.PrefixFailureCallback) in a /v2/batch entry: the prefix, then the name without its
// own "Upstash-".
func nestedHeader(prefix, name string) string {
	return strings.ToLower(prefix + strings.TrimPrefix(name, "Upstash-"))
}

// stepHeaders are the headers of a step publish (docs/protocol.md, "Steps"), lower-cased as in
// /v2/batch.
func (c *Context) stepHeaders() map[string]string {
	return map[string]string{
		batchHeader(wire.HeaderWorkflowInit): "false", batchHeader(wire.HeaderWorkflowRunID): c.RunID,
		batchHeader(wire.HeaderWorkflowURL): c.URL, batchHeader(wire.HeaderWorkflowSdkVersion): wire.SdkVersion,
		batchHeader(wire.PrefixForward + wire.HeaderWorkflowSdkVersion): wire.SdkVersion,
		batchHeader(wire.HeaderFeatureSet):                              wire.FeatureSet, batchHeader(wire.HeaderMethod): http.MethodPost,
		batchHeader(wire.HeaderContentType): "application/json",
	}
}

// publishSteps publishes step messages in one /v2/batch request, or makes them the
// delivery's inline answer when it offers one (inline.go).
func (h *handler) publishSteps(c *Context, msgs []stepMessage) error {
	raw, err := c.batchJSON(msgs)
	if err != nil {
		return err
	}
	if c.answerInline(wire.InlineSteps, raw) {
		return nil
	}
	return h.client.do(c.requestContext(), http.MethodPost, "/v2/batch", nil, http.Header{wire.HeaderContentType: {"application/json"}}, raw, nil)
}

// batchJSON is the /v2/batch body that publishes msgs.
func (c *Context) batchJSON(msgs []stepMessage) ([]byte, error) {
	entries := make([]wire.BatchEntry, len(msgs))
	for i, m := range msgs {
		e := wire.BatchEntry{Destination: c.URL, Headers: c.stepHeaders()}
		if m.destination != "" {
			e.Destination = m.destination
		}
		for k, v := range m.header {
			if v == "" {
				delete(e.Headers, k)
			} else {
				e.Headers[k] = v
			}
		}
		switch b := m.body.(type) {
		case nil:
		case []byte:
			e.Body = string(b)
		default:
			raw, err := json.Marshal(b)
			if err != nil {
				return nil, err
			}
			e.Body = string(raw)
		}
		entries[i] = e
	}
	return wire.AppendBatchJSON(make([]byte, 0, batchSize(entries)), entries), nil
}

// schedule publishes msgs and stops the route for this delivery.
func (c *Context) schedule(msgs ...stepMessage) {
	if err := c.h.publishSteps(c, msgs); err != nil {
		panic(stepFailed{err})
	}
	panic(stepDone{condition: "success"})
}

// take gives the next step id. A step after a deferred result ends the delivery with
// that result (inline.go): this one runs in the next delivery.
func (c *Context) take() int {
	c.flushDeferred()
	id := c.next
	c.next++
	return id
}

// StepOption configures one Run step.
type StepOption func(*stepOptions)

type stepOptions struct {
	flow    *FlowControl
	retries *int
}

// WithStepFlowControl gates this step under its own flow-control key, replacing the run's
// configuration for it (Duraton's per-step override, docs/protocol.md, "Per-step flow
// control").
func WithStepFlowControl(fc FlowControl) StepOption {
	return func(o *stepOptions) { o.flow = &fc }
}

// WithStepRetries gives this step its own retry count (with WithStepFlowControl or alone).
func WithStepRetries(n int) StepOption { return func(o *stepOptions) { o.retries = &n } }

// Run executes fn once as the step name and records its result; on later deliveries the
// recorded result is returned without calling fn.
//
// When Duraton offers inline answers, the route goes on with fn's result in the same
// delivery up to its next step or its end (inline.go). So the code between two steps may
// run once with a result that is then lost (a crash before it is recorded: fn runs
// again); keep side effects inside steps, as code outside them already runs on every
// delivery. WithoutInlineAnswers turns this off.
func Run[T any](c *Context, name string, fn func() (T, error), opts ...StepOption) (T, error) {
	return runStep(c, name, "Run", fn, opts...)
}

// runStep is Run for steps of another type that compute their result in the SDK
// (CreateWebhook).
func runStep[T any](c *Context, name, stepType string, fn func() (T, error), opts ...StepOption) (T, error) {
	var zero T
	id := c.take()
	if s, ok, err := c.recorded(id, name, stepType); err != nil {
		return zero, err
	} else if ok {
		return decodeOut[T](s)
	}
	var o stepOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.flow != nil || o.retries != nil {
		// A step with its own config runs in a delivery of its own, admitted under it:
		// publish a plan step now and execute when that delivery arrives.
		if plan, ok := c.plans[id]; !ok || c.last.StepID != 0 || c.last.TargetStep != id {
			if ok && plan.StepName != name {
				return zero, mismatch(id, name, stepType, plan.StepName, plan.StepType)
			}
			if !ok {
				c.schedule(stepMessage{body: map[string]any{"stepId": 0, "stepName": name, "stepType": stepType, "concurrent": 1, "targetStep": id}, header: o.headers()})
			}
			panic(stepDone{condition: "discard"})
		}
	}
	v, err := fn()
	if err != nil {
		return zero, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("step %q: encode result: %w", name, err)
	}
	msg := stepMessage{body: resultStep{Concurrent: 1, Out: string(out), StepID: id, StepName: name, StepType: stepType}}
	if stepType == "Run" && c.deferResult(msg) { // inline.go
		// The route goes on with the result as a later delivery would replay it.
		return decodeResult[T](name, out)
	}
	c.schedule(msg)
	return zero, nil // not reached
}

// resultStep is stepObject(id, name, stepType, out, concurrent) for a step's result, as
// a struct: its fields in the order json.Marshal sorts the map's keys, so the bytes are
// the same (TestResultStepEncodesLikeStepObject) without a map and its sorting.
type resultStep struct {
	Concurrent int    `json:"concurrent"`
	Out        string `json:"out"`
	StepID     int    `json:"stepId"`
	StepName   string `json:"stepName"`
	StepType   string `json:"stepType"`
}

// batchSize is about the size of entries' batch JSON, to allocate it once.
func batchSize(entries []wire.BatchEntry) int {
	n := 2
	for _, e := range entries {
		n += 48 + len(e.Destination) + len(e.Body) + len(e.Queue)
		for k, v := range e.Headers {
			n += len(k) + len(v) + 6
		}
	}
	return n
}

func (o stepOptions) headers() map[string]string {
	h := map[string]string{}
	if o.flow != nil {
		h[batchHeader(wire.HeaderFlowControlKey)] = o.flow.Key
		h[batchHeader(wire.HeaderFlowControlValue)] = o.flow.value()
	}
	if o.retries != nil {
		h[batchHeader(wire.HeaderRetries)] = strconv.Itoa(*o.retries)
	}
	return h
}

// decodeOut decodes a recorded result.
func decodeOut[T any](s recordedStep) (T, error) {
	return decodeResult[T](s.StepName, s.outBytes())
}

// decodeResult decodes a step's result as its out records it (JSON).
func decodeResult[T any](name string, out []byte) (T, error) {
	var v T
	if len(out) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return v, fmt.Errorf("step %q: decode recorded result: %w", name, err)
	}
	return v, nil
}

// Sleep pauses the run for d (durably: no process waits).
func (c *Context) Sleep(name string, d time.Duration) error {
	id := c.take()
	if _, ok, err := c.recorded(id, name, "SleepFor"); ok || err != nil {
		return err
	}
	secs := int64(d.Round(time.Second) / time.Second)
	step := stepObject(id, name, "SleepFor", nil, 1)
	step["sleepFor"] = secs
	c.schedule(stepMessage{body: step, header: map[string]string{batchHeader(wire.HeaderDelay): strconv.FormatInt(secs, 10) + "s"}})
	return nil
}

// SleepUntil pauses the run until t.
func (c *Context) SleepUntil(name string, t time.Time) error {
	id := c.take()
	if _, ok, err := c.recorded(id, name, "SleepUntil"); ok || err != nil {
		return err
	}
	step := stepObject(id, name, "SleepUntil", nil, 1)
	step["sleepUntil"] = t.Unix()
	c.schedule(stepMessage{body: step, header: map[string]string{batchHeader(wire.HeaderNotBefore): strconv.FormatInt(t.Unix(), 10)}})
	return nil
}

// CallRequest is an HTTP request Duraton makes on the run's behalf (context.call).
type CallRequest struct {
	URL         string
	Method      string // default POST
	Body        []byte
	Header      http.Header
	Retries     int
	Timeout     time.Duration
	FlowControl *FlowControl // gates the outbound request only
}

// CallResponse is the third party's answer.
type CallResponse struct {
	Status int                 `json:"status"`
	Body   []byte              `json:"body"`
	Header map[string][]string `json:"header"`
}

// Call has Duraton make an HTTP request (with its own retries) and returns the answer;
// the run holds nothing while the request is under way.
func (c *Context) Call(name string, req CallRequest) (CallResponse, error) {
	return c.call(name, req, nil)
}

// call is Call with extra headers on the call's publish (not forwarded to the third
// party), e.g. the AI step marker.
func (c *Context) call(name string, req CallRequest, publish map[string]string) (CallResponse, error) {
	id := c.take()
	if s, ok, err := c.recorded(id, name, "Call"); err != nil {
		return CallResponse{}, err
	} else if ok {
		return decodeOut[CallResponse](s)
	}
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	cb := func(name string) string { return nestedHeader(wire.PrefixCallback, name) }
	cbForward := func(name string) string { return nestedHeader(wire.PrefixCallback, wire.PrefixForward+name) }
	contentType := batchHeader(wire.HeaderContentType)
	h := map[string]string{
		batchHeader(wire.HeaderWorkflowCallType): wire.CallTypeToCallback, batchHeader(wire.HeaderWorkflowInit): "false",
		batchHeader(wire.HeaderWorkflowRunID): c.RunID, batchHeader(wire.HeaderWorkflowURL): c.URL,
		batchHeader(wire.HeaderFeatureSet): "WF_NoDelete,InitialBody", batchHeader(wire.HeaderMethod): method,
		batchHeader(wire.HeaderRetries): strconv.Itoa(req.Retries), batchHeader(wire.PrefixForward + wire.HeaderWorkflowSdkVersion): "",
		batchHeader(wire.HeaderCallback): c.URL, cb(wire.HeaderWorkflowRunID): c.RunID, cb(wire.HeaderWorkflowCallType): wire.CallTypeFromCallback,
		cb(wire.HeaderWorkflowInit): "false", cb(wire.HeaderWorkflowURL): c.URL, cb(wire.HeaderFeatureSet): wire.FeatureSet,
		cbForward(wire.HeaderWorkflowCallback): "true", cbForward(wire.HeaderWorkflowStepID): strconv.Itoa(id),
		cbForward(wire.HeaderWorkflowStepName): name, cbForward(wire.HeaderWorkflowStepType): "Call",
		cbForward(wire.HeaderWorkflowConcurrent): "1", contentType: "application/json",
	}
	for k, vs := range req.Header {
		if strings.EqualFold(k, wire.HeaderContentType) {
			h[contentType] = vs[0]
			continue
		}
		h[batchHeader(wire.PrefixForward+k)] = strings.Join(vs, ",")
	}
	h[cbForward(wire.HeaderWorkflowContentType)] = h[contentType]
	if req.Timeout > 0 {
		h[batchHeader(wire.HeaderTimeout)] = strconv.Itoa(int(req.Timeout.Round(time.Second)/time.Second)) + "s"
	}
	if fc := req.FlowControl; fc != nil {
		h[batchHeader(wire.HeaderFlowControlKey)], h[batchHeader(wire.HeaderFlowControlValue)] = fc.Key, fc.value()
	}
	for k, v := range publish {
		h[batchHeader(k)] = v
	}
	c.schedule(stepMessage{destination: req.URL, body: nonNilBytes(req.Body), header: h})
	return CallResponse{}, nil
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// WaitResult is what a wait for an event returns: the event's data, or Timeout.
type WaitResult struct {
	Data    []byte
	Timeout bool
}

// WaitForEvent waits until eventID is notified (Client.Notify) or timeout passes.
func (c *Context) WaitForEvent(name, eventID string, timeout time.Duration) (WaitResult, error) {
	return c.wait(name, "Wait", eventID, timeout, "")
}

// Wait describes a wait for an event (WaitForEvent).
type Wait struct {
	// Event is the event to wait for: an event name (POST /events) or a notify id.
	Event string
	// Timeout bounds the wait (default 7 days).
	Timeout time.Duration
	// Match is a dotted path ("data.orderId"): only an event whose value there equals
	// the value in this run's triggering event wakes the wait. The server indexes it.
	Match string
	// If is a CEL condition over `event` (this run's triggering event) and `async` (the
	// incoming event), e.g. `async.data.amount > 100`: only an event for which it holds
	// wakes the wait. With Match, both must hold.
	If string
}

// defaultWaitTimeout is a Wait's timeout when none is given (the SDKs' "7d").
const defaultWaitTimeout = 7 * 24 * time.Hour

// WaitForEvent waits for w.Event, woken only by an event that satisfies w.Match and
// w.If (none: any event of the name), or until w.Timeout passes. A condition that does
// not compile fails the step: the server answers the wait with a 400 naming it.
func WaitForEvent(c *Context, name string, w Wait) (WaitResult, error) {
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = defaultWaitTimeout
	}
	return c.wait(name, "Wait", w.Event, timeout, waitCondition(w.Match, w.If))
}

// waitCondition is the Duraton-Wait-If value of a match and an if (one line: a header
// value holds no line break, and CEL reads one as a space).
func waitCondition(match, cond string) string {
	cond = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(cond)
	switch {
	case match != "" && cond != "":
		return "(" + wire.WaitMatchIf(match) + ") && (" + cond + ")"
	case match != "":
		return wire.WaitMatchIf(match)
	}
	return cond
}

func (c *Context) wait(name, stepType, eventID string, timeout time.Duration, cond string) (WaitResult, error) {
	id := c.take()
	if s, ok, err := c.recorded(id, name, stepType); err != nil {
		return WaitResult{}, err
	} else if ok {
		if s.WaitTimeout {
			return WaitResult{Timeout: true}, nil
		}
		data, err := base64.StdEncoding.DecodeString(s.outString())
		if err != nil {
			return WaitResult{}, fmt.Errorf("step %q: decode event: %w", name, err)
		}
		return WaitResult{Data: data}, nil
	}
	secs := max(1, int64(timeout.Round(time.Second)/time.Second))
	timeoutHeaders := map[string][]string{}
	for k, v := range c.stepHeaders() {
		timeoutHeaders[k] = []string{v}
	}
	body, err := json.Marshal(map[string]any{
		"url": c.URL, "timeout": strconv.FormatInt(secs, 10) + "s", "timeoutUrl": c.URL, "timeoutHeaders": timeoutHeaders,
		"step": stepObject(id, name, stepType, nil, 1),
	})
	if err != nil {
		return WaitResult{}, err
	}
	header := http.Header{}
	for k, v := range c.stepHeaders() {
		header.Set(k, v)
	}
	if cond != "" {
		header.Set(wire.HeaderWaitIf, cond)
	}
	if err := c.h.client.do(c.requestContext(), http.MethodPost, "/v2/wait/"+url.PathEscape(eventID), nil, header, body, nil); err != nil {
		panic(stepFailed{err})
	}
	panic(stepDone{condition: "success"})
}

// Notify notifies eventID with data as a step (recorded once).
func (c *Context) Notify(name, eventID string, data []byte) ([]NotifyResult, error) {
	return Run(c, name, func() ([]NotifyResult, error) {
		return c.h.client.Notify(c.requestContext(), eventID, data)
	})
}

// Webhook is a URL that resumes the run when called (CreateWebhook).
type Webhook struct {
	URL     string `json:"webhookUrl"`
	EventID string `json:"eventId"`
}

// CreateWebhook makes a webhook URL for WaitForWebhook. The server adds a secret to the
// URL when it records the step (so the URL this returns on replay is the one to hand
// out); anyone holding the URL can resume the wait, so treat it as a credential.
func (c *Context) CreateWebhook(name string) (Webhook, error) {
	return runStep(c, name, "CreateWebhook", func() (Webhook, error) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		event := "evt_" + hex.EncodeToString(b[:])
		return Webhook{URL: strings.TrimRight(c.h.cfg.baseURL, "/") + "/v2/workflows/hooks/" + userIDOf(c.h.cfg.token) + "/" + c.RunID + "/" + event, EventID: event}, nil
	})
}

// userIDOf reads the UserID inside a base64 JSON token (the form Duraton issues).
func userIDOf(token string) string {
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		return ""
	}
	var t struct{ UserID string }
	_ = json.Unmarshal(raw, &t)
	return t.UserID
}

// WebhookCall is the request that called a webhook.
type WebhookCall = wire.WebhookCall

// WaitForWebhook waits until the webhook is called (or timeout passes).
func (c *Context) WaitForWebhook(name string, hook Webhook, timeout time.Duration) (WebhookCall, bool, error) {
	res, err := c.wait(name, "WaitForWebhook", hook.EventID, timeout, "")
	if err != nil || res.Timeout {
		return WebhookCall{}, res.Timeout, err
	}
	var call WebhookCall
	if err := json.Unmarshal(res.Data, &call); err != nil {
		return WebhookCall{}, false, fmt.Errorf("step %q: decode webhook call: %w", name, err)
	}
	return call, false, nil
}

// Cancel ends the run as cancelled; nothing after it runs.
func (c *Context) Cancel() error {
	c.flushDeferred() // the step before it is recorded first; the next delivery cancels
	if err := c.h.client.do(c.requestContext(), http.MethodDelete, "/v2/workflows/runs/"+c.RunID, url.Values{"cancel": {"true"}}, nil, nil, nil); err != nil {
		return err
	}
	panic(stepDone{condition: "canceled"})
}

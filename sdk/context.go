package sdk

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duraton/duraton/sdk/wire"
)

// Context is what a workflow route sees on each delivery: the run, the initial payload,
// the delivery's headers, and the steps recorded so far. Step functions (Run, Sleep,
// Call, ...) replay recorded steps and run or schedule the first new one; after that one
// the route is stopped for this delivery and resumes on the next.
type Context struct {
	// RunID is the workflow run id; URL the workflow's URL.
	RunID, URL string
	// Headers are the delivery's headers without Upstash-Workflow-* and signature headers.
	Headers http.Header
	// Labels are the run's labels.
	Labels []string
	// Retried is how many times this delivery was retried.
	Retried int
	// RunCreatedAt is when the run was created.
	RunCreatedAt time.Time

	payload []byte
	flow    *FlowControl
	steps   map[int]recordedStep // by stepId (results)
	plans   map[int]recordedStep // by targetStep (plan steps)
	last    recordedStep         // the entry this delivery ends with
	next    int                  // the id the next step call gets

	// inlineMax is the size of inline answer the delivery offers (wire.HeaderInline; 0:
	// none); inline is the answer once a step made one, deferred a Run step's result the
	// route went on with (inline.go).
	inlineMax int64
	inline    *inlineReply
	deferred  *stepMessage

	h *handler
	r *http.Request
}

// recordedStep is a step object of the history (docs/protocol.md, "Steps").
type recordedStep struct {
	StepID      int             `json:"stepId"`
	StepName    string          `json:"stepName"`
	StepType    string          `json:"stepType"`
	Out         json.RawMessage `json:"out,omitempty"`
	Concurrent  int             `json:"concurrent"`
	TargetStep  int             `json:"targetStep,omitempty"`
	WaitTimeout bool            `json:"waitTimeout,omitempty"`
	SleepFor    any             `json:"sleepFor,omitempty"`
	SleepUntil  any             `json:"sleepUntil,omitempty"`
}

// outString returns the step's out as the string the SDKs put there (a JSON string whose
// content is the JSON-encoded result).
func (s recordedStep) outString() string { return string(s.outBytes()) }

// outBytes is outString's content without a copy when the JSON string has nothing to
// unescape (a result that encodes without quotes: a number, a boolean, null); the bytes
// are then part of s.Out and only to be read.
func (s recordedStep) outBytes() []byte {
	if plain, ok := plainJSONStringContent(s.Out); ok {
		return plain
	}
	var str string
	if json.Unmarshal(s.Out, &str) == nil {
		return []byte(str)
	}
	return s.Out // an SDK that wrote an object
}

// plainJSONStringContent returns what the JSON string raw holds when it is one that
// decodes to its own bytes: quoted, valid UTF-8, no escape, quote or control character
// inside (encoding/json would otherwise unescape, or replace invalid UTF-8).
func plainJSONStringContent(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	in := raw[1 : len(raw)-1]
	for _, b := range in {
		if b < 0x20 || b == '"' || b == '\\' {
			return nil, false
		}
	}
	return in, utf8.Valid(in)
}

// Payload is the run's initial payload, as triggered.
func (c *Context) Payload() []byte { return c.payload }

// DecodePayload decodes the initial payload as JSON into v.
func (c *Context) DecodePayload(v any) error { return json.Unmarshal(c.payload, v) }

// FlowControl is the flow-control configuration this delivery was admitted under (the
// run's, or a step's own), or nil (docs/protocol.md, "Per-step flow control").
func (c *Context) FlowControl() *FlowControl { return c.flow }

// parseHistory reads the delivered history: the initial payload and the step objects.
func (c *Context) parseHistory(body []byte) error {
	entries, err := wire.DecodeHistory(body) // without reflection for what Duraton sends
	if err != nil {
		return fmt.Errorf("workflow history: %w", err)
	}
	if len(entries) == 0 {
		return fmt.Errorf("workflow history is empty")
	}
	c.steps, c.plans = make(map[int]recordedStep, len(entries)-1), nil // plans: made when one comes
	for i, e := range entries {
		raw := e.Body
		if i == 0 {
			c.payload = raw
			continue
		}
		if e.CallType != "" && e.CallType != wire.CallTypeStep {
			continue
		}
		var s recordedStep
		if err := decodeStep(raw, &s); err != nil { // step_decode.go
			return fmt.Errorf("workflow history entry %d: %w", i, err)
		}
		if s.StepID == 0 && s.TargetStep > 0 {
			if c.plans == nil {
				c.plans = map[int]recordedStep{}
			}
			c.plans[s.TargetStep] = s
		} else if _, dup := c.steps[s.StepID]; !dup {
			c.steps[s.StepID] = s
		}
		c.last = s
	}
	c.next = 1
	return nil
}

// readDeliveryHeaders fills the run fields from the delivery's headers.
func (c *Context) readDeliveryHeaders(h http.Header) {
	c.RunID = h.Get(wire.HeaderWorkflowRunID)
	c.Retried, _ = strconv.Atoi(h.Get(wire.HeaderRetried))
	if ms, err := strconv.ParseInt(h.Get(wire.HeaderWorkflowCreatedAt), 10, 64); err == nil {
		c.RunCreatedAt = time.UnixMilli(ms)
	}
	if l := h.Get(wire.HeaderLabel); l != "" {
		c.Labels = strings.Split(l, ",")
	}
	if key := h.Get(wire.HeaderFlowControlKey); key != "" {
		c.flow = parseFlowControl(key, h.Get(wire.HeaderFlowControlValue))
	}
	if n, err := strconv.ParseInt(h.Get(wire.HeaderInline), 10, 64); err == nil && n > 0 {
		c.inlineMax = n
	}
	c.Headers = http.Header{}
	for k, v := range h {
		if strings.HasPrefix(k, wire.PrefixWorkflow) || k == wire.HeaderSignature || k == wire.HeaderInline {
			continue
		}
		c.Headers[k] = v
	}
}

// parseFlowControl reads the delivered "parallelism=N, rate=N, period=Ns". Duraton
// always sends a well-formed value; a malformed one leaves only the key known.
func parseFlowControl(key, value string) *FlowControl {
	v, err := wire.ParseFlowControlValue(value)
	if err != nil {
		return &FlowControl{Key: key}
	}
	return &FlowControl{Key: key, Parallelism: v.Parallelism, Rate: v.Rate, Period: v.Period}
}

// recorded returns step id's recorded result, checking that the route still calls the
// same step there.
func (c *Context) recorded(id int, name, stepType string) (recordedStep, bool, error) {
	s, ok := c.steps[id]
	if !ok {
		return s, false, nil
	}
	// Runs recorded before CreateWebhook had its own step type have it as a Run step.
	sameKind := s.StepType == stepType || (stepType == "Wait" && s.StepType == "WaitForWebhook") ||
		(stepType == "CreateWebhook" && s.StepType == "Run")
	if s.StepName != name || !sameKind {
		return s, true, mismatch(id, name, stepType, s.StepName, s.StepType)
	}
	return s, true, nil
}

// stepObject is what the SDK publishes for a step.
func stepObject(id int, name, stepType string, out any, concurrent int) map[string]any {
	o := map[string]any{"stepId": id, "stepName": name, "stepType": stepType, "concurrent": concurrent}
	if out != nil {
		o["out"] = out
	}
	return o
}

package sdk

import (
	"encoding/json"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// ReceivedEvent is an event as a native run receives it (native-api.md, "What the
// endpoint receives").
type ReceivedEvent struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Data json.RawMessage `json:"data"`
	// Ts is when the server received it, unix milliseconds.
	Ts int64 `json:"ts"`
}

// Time is when the server received the event.
func (e ReceivedEvent) Time() time.Time { return time.UnixMilli(e.Ts) }

// Decode decodes the event's data as JSON into v.
func (e ReceivedEvent) Decode(v any) error { return json.Unmarshal(e.Data, v) }

// nativePayload is a native run's initial payload.
type nativePayload struct {
	ReceivedEvent
	Events []ReceivedEvent `json:"events"`
}

// native parses the run's payload as a native run's; ok is false for a run not started
// by an event (no Duraton-Workflow header, or a payload of another shape).
func (c *Context) native() (nativePayload, bool) {
	var p nativePayload
	if c.Headers.Get(wire.HeaderDuratonWorkflow) == "" || json.Unmarshal(c.payload, &p) != nil || p.ID == "" || len(p.Events) == 0 {
		return nativePayload{}, false
	}
	return p, true
}

// Event is the event that started this native run (for a batch the first of its
// events, for a debounce the last of the burst); ok is false when the run was not
// started by an event.
func (c *Context) Event() (ReceivedEvent, bool) {
	p, ok := c.native()
	return p.ReceivedEvent, ok
}

// Events are every event of this native run in receive order (one unless the workflow
// batches); nil when the run was not started by an event.
func (c *Context) Events() []ReceivedEvent {
	p, ok := c.native()
	if !ok {
		return nil
	}
	return p.Events
}

// Workflow and App name the native workflow this run belongs to ("" when the run was not
// started by an event).
func (c *Context) Workflow() string { return c.Headers.Get(wire.HeaderDuratonWorkflow) }

// App is the app of the native workflow this run belongs to.
func (c *Context) App() string { return c.Headers.Get(wire.HeaderDuratonApp) }

package sdk

import (
	"encoding/json"

	"github.com/duraton/duraton/sdk/wire"
)

// ReceivedEvent is an event as a native run receives it (docs/protocol.md, "Native workflows").
// Time and Decode read it.
type ReceivedEvent = wire.ReceivedEvent

// native parses the run's payload as a native run's; ok is false for a run not started
// by an event (no Duraton-Workflow header, or a payload of another shape).
func (c *Context) native() (wire.NativePayload, bool) {
	var p wire.NativePayload
	if c.Headers.Get(wire.HeaderDuratonWorkflow) == "" || json.Unmarshal(c.payload, &p) != nil || p.ID == "" || len(p.Events) == 0 {
		return wire.NativePayload{}, false
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

// Workflow names the native workflow this run belongs to ("" when the run was not
// started by an event).
func (c *Context) Workflow() string { return c.Headers.Get(wire.HeaderDuratonWorkflow) }

// App is the app of the native workflow this run belongs to.
func (c *Context) App() string { return c.Headers.Get(wire.HeaderDuratonApp) }

package sdk

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// Native workflows (docs/protocol.md, "Native workflows"): definitions registered per app with
// Client.RegisterApp, started by events sent with Client.SendEvent(s), served by any
// route of Serve (the event is Context.Event). Times are milliseconds, as on the wire.

// The JSON types of the native API, re-exported from sdk/wire under the same names.
type (
	// Controls are a workflow's flow controls as the server reports them.
	Controls = wire.Controls
	// Concurrency limits deliveries holding a slot at once, per value of Key.
	Concurrency = wire.Concurrency
	// Rate is a throttle (delays run starts) or a rateLimit (drops events).
	Rate = wire.Rate
	// Debounce starts one run after a quiet period.
	Debounce = wire.Debounce
	// Batch starts one run per MaxSize events or TimeoutMs after the first.
	Batch = wire.Batch
	// Priority orders the workflow's deliveries as if enqueued ShiftMs earlier (or, with
	// Run, a CEL expression over the event, that many seconds earlier per run).
	Priority = wire.Priority
	// CancelOn is an event that cancels a workflow's runs it matches (Workflow.CancelOn).
	CancelOn = wire.CancelOn
	// Singleton keeps at most one live run per key.
	Singleton = wire.Singleton
	// Idempotency starts one run per key value per window.
	Idempotency = wire.Idempotency
	// Cap bounds a run's AI spend.
	Cap = wire.Cap
	// TokenThrottle limits the AI tokens of a scope per window.
	TokenThrottle = wire.TokenThrottle
	// RegisteredWorkflow is a definition as the server stored it, normalized.
	RegisteredWorkflow = wire.RegisteredWorkflow
	// RegisteredApp is a registered app with its workflows.
	RegisteredApp = wire.RegisteredApp
	// EventResult is what the server did with one event.
	EventResult = wire.EventResult
	// EventRun is what one workflow did with an event.
	EventRun = wire.EventRun
)

// RegisterApp registers the app's workflows, replacing its whole previous set atomically
// (PUT /apps/{app}, the body derived from app's definitions), and returns what the
// server stored. A bad definition is an *APIError with status 400 naming the workflow
// and the field.
func (c *Client) RegisterApp(ctx context.Context, app *App) (*RegisteredApp, error) {
	if app == nil {
		return nil, errEmpty("RegisterApp", "app")
	}
	var out RegisteredApp
	if err := c.doJSON(ctx, http.MethodPut, "/apps/"+seg(app.name), nil, app.Definition(), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Event is an event to send: its name, its data (any JSON-encodable value; nil sends
// none, which the server takes as null) and an optional DedupeID (a repeat within 24 h
// starts nothing). Delay or At (at most one, at most 365 days ahead) delays its fan-out:
// the server stores it at once and starts its runs then.
type Event struct {
	Name     string
	Data     any
	DedupeID string
	Delay    time.Duration
	At       time.Time
}

// SendEvent sends one event (POST /events); it returns once the event and every run it
// started are durable.
func (c *Client) SendEvent(ctx context.Context, e Event) (EventResult, error) {
	res, err := c.SendEvents(ctx, []Event{e})
	if err != nil {
		return EventResult{}, err
	}
	return res[0], nil
}

// SendEvents sends up to 1,000 events in one request, stored in one transaction, and
// returns one result per event in order.
func (c *Client) SendEvents(ctx context.Context, events []Event) ([]EventResult, error) {
	if len(events) == 0 {
		return nil, errEmpty("SendEvents", "an event")
	}
	in := make([]wire.EventIn, len(events))
	for i, e := range events {
		if e.Name == "" {
			return nil, fmt.Errorf("sdk: SendEvents: events[%d]: name is required", i)
		}
		in[i] = wire.EventIn{Name: e.Name, DedupeID: e.DedupeID}
		if e.Data != nil { // nil goes without data: the server refuses "data": null
			data, err := wire.CompactJSON(e.Data)
			if err != nil {
				return nil, fmt.Errorf("sdk: SendEvents: events[%d].data: %w", i, err)
			}
			in[i].Data = data
		}
		switch {
		case e.Delay != 0 && !e.At.IsZero():
			return nil, fmt.Errorf("sdk: SendEvents: events[%d]: give Delay or At, not both", i)
		case e.Delay != 0:
			in[i].Delay = e.Delay.String()
		case !e.At.IsZero():
			in[i].Ts = e.At.UnixMilli()
		}
	}
	var out struct {
		Events []EventResult `json:"events"`
	}
	if err := c.doJSON(ctx, http.MethodPost, "/events", nil, in, &out); err != nil {
		return nil, err
	}
	if len(out.Events) != len(events) {
		return nil, fmt.Errorf("sdk: SendEvents: %d results for %d events", len(out.Events), len(events))
	}
	return out.Events, nil
}

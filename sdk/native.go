package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/duraton/duraton/sdk/wire"
)

// Native workflows (native-api.md): definitions registered per app with
// Client.RegisterApp, started by events sent with Client.SendEvent(s), served by any
// route of Serve (the event is Context.Event). Times are milliseconds, as on the wire.

// Workflow is a native workflow definition: the endpoint that runs it, the event names
// that start it, and any of the flat controls (a nil control is off).
type Workflow struct {
	Name     string
	URL      string
	Triggers []string
	// Retries of each delivery; nil takes the server's default (3).
	Retries *int
	Controls
}

// Controls are a workflow's flow controls (flow-control.md §B).
type Controls struct {
	Concurrency   []Concurrency  `json:"concurrency,omitempty"`
	Throttle      *Rate          `json:"throttle,omitempty"`
	RateLimit     *Rate          `json:"rateLimit,omitempty"`
	Debounce      *Debounce      `json:"debounce,omitempty"`
	Batch         *Batch         `json:"batch,omitempty"`
	Priority      *Priority      `json:"priority,omitempty"`
	Singleton     *Singleton     `json:"singleton,omitempty"`
	Idempotency   *Idempotency   `json:"idempotency,omitempty"`
	Cap           *Cap           `json:"cap,omitempty"`
	TokenThrottle *TokenThrottle `json:"tokenThrottle,omitempty"`
}

// Concurrency limits deliveries holding a slot at once, per value of Key (a dotted path
// into the event's data; "" for the whole workflow).
type Concurrency struct {
	Limit int    `json:"limit"`
	Key   string `json:"key,omitempty"`
}

// Rate is a throttle (delays run starts) or a rateLimit (drops events): Limit per PerMs,
// burst = Limit.
type Rate struct {
	Limit int    `json:"limit"`
	PerMs int64  `json:"perMs"`
	Key   string `json:"key,omitempty"`
}

// Debounce starts one run PeriodMs after the last event of a burst (at the latest
// TimeoutMs after its first).
type Debounce struct {
	PeriodMs  int64  `json:"periodMs"`
	Key       string `json:"key,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// Batch starts one run per MaxSize events or TimeoutMs after the first.
type Batch struct {
	MaxSize   int    `json:"maxSize"`
	TimeoutMs int64  `json:"timeoutMs"`
	Key       string `json:"key,omitempty"`
}

// Priority orders the workflow's deliveries as if enqueued ShiftMs earlier.
type Priority struct {
	ShiftMs int64 `json:"shiftMs"`
}

// Singleton keeps at most one live run per key; Mode "cancel" (default) or "skip".
type Singleton struct {
	Key  string `json:"key,omitempty"`
	Mode string `json:"mode,omitempty"`
}

// Idempotency starts one run per key value per PeriodMs (default 24 h).
type Idempotency struct {
	Key      string `json:"key,omitempty"`
	PeriodMs int64  `json:"periodMs,omitempty"`
}

// Cap bounds a run's AI spend.
type Cap struct {
	MaxCost   *float64 `json:"maxCost,omitempty"`
	MaxTokens *int64   `json:"maxTokens,omitempty"`
}

// TokenThrottle limits the AI tokens of a scope per PerMs.
type TokenThrottle struct {
	Tokens int64  `json:"tokens"`
	PerMs  int64  `json:"perMs"`
	Key    string `json:"key,omitempty"`
}

type trigger struct {
	Event string `json:"event"`
}

// workflowJSON is a definition on the wire: the controls flat beside the fields.
type workflowJSON struct {
	Name     string    `json:"name"`
	URL      string    `json:"url"`
	Triggers []trigger `json:"triggers"`
	Retries  *int      `json:"retries,omitempty"`
	Controls
}

// RegisteredWorkflow is a definition as the server stored it, normalized.
type RegisteredWorkflow struct {
	App         string    `json:"app"`
	Name        string    `json:"name"`
	URL         string    `json:"url"`
	Triggers    []trigger `json:"triggers"`
	Retries     int       `json:"retries"`
	FlowControl Controls  `json:"flowControl"`
	CreatedAt   int64     `json:"createdAt"`
	UpdatedAt   int64     `json:"updatedAt"`
}

// TriggerEvents are the event names that start the workflow.
func (w RegisteredWorkflow) TriggerEvents() []string {
	out := make([]string, len(w.Triggers))
	for i, t := range w.Triggers {
		out[i] = t.Event
	}
	return out
}

// App is a registered app with its workflows.
type App struct {
	Name      string               `json:"name"`
	CreatedAt int64                `json:"createdAt"`
	UpdatedAt int64                `json:"updatedAt"`
	Workflows []RegisteredWorkflow `json:"workflows"`
}

// RegisterApp registers the app's workflows, replacing its whole previous set atomically
// (PUT /apps/{app}), and returns what the server stored. A bad definition is an
// *APIError with status 400 naming the workflow and the field.
func (c *Client) RegisterApp(ctx context.Context, app string, workflows []Workflow) (*App, error) {
	if app == "" {
		return nil, errEmpty("RegisterApp", "app name")
	}
	body := struct {
		Workflows []workflowJSON `json:"workflows"`
	}{Workflows: make([]workflowJSON, len(workflows))}
	for i, w := range workflows {
		ts := make([]trigger, len(w.Triggers))
		for j, e := range w.Triggers {
			ts[j] = trigger{Event: e}
		}
		body.Workflows[i] = workflowJSON{Name: w.Name, URL: w.URL, Triggers: ts, Retries: w.Retries, Controls: w.Controls}
	}
	var out App
	if err := c.doJSON(ctx, http.MethodPut, "/apps/"+seg(app), nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Event is an event to send: its name, its data (any JSON-encodable value; nil is
// null) and an optional DedupeID (a repeat within 24 h starts nothing).
type Event struct {
	Name     string
	Data     any
	DedupeID string
}

// EventResult is what the server did with one event: its id and, per workflow whose
// trigger names it, the outcome. Deduped when its DedupeID was seen (ID is then the
// first event's).
type EventResult struct {
	ID      string     `json:"id"`
	Deduped bool       `json:"deduped,omitempty"`
	Runs    []EventRun `json:"runs"`
}

// EventRun is what one workflow did with an event: exactly one of RunID (a run was
// started), Dropped (rateLimit), Deduped (idempotency), Skipped (singleton, with
// HolderRunID), Debounced or Batched is set.
type EventRun struct {
	Workflow    string `json:"workflow"`
	RunID       string `json:"runId,omitempty"`
	Dropped     bool   `json:"dropped,omitempty"`
	Deduped     bool   `json:"deduped,omitempty"`
	Skipped     bool   `json:"skipped,omitempty"`
	HolderRunID string `json:"holderRunId,omitempty"`
	Debounced   bool   `json:"debounced,omitempty"`
	Batched     bool   `json:"batched,omitempty"`
}

// Started reports whether the event started a run of the workflow.
func (r EventRun) Started() bool { return r.RunID != "" }

// Run returns the outcome of the named workflow, false when the event did not match it.
func (r EventResult) Run(workflow string) (EventRun, bool) {
	for _, x := range r.Runs {
		if x.Workflow == workflow {
			return x, true
		}
	}
	return EventRun{}, false
}

type eventJSON struct {
	Name     string          `json:"name"`
	Data     json.RawMessage `json:"data"`
	DedupeID string          `json:"dedupeId,omitempty"`
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
	in := make([]eventJSON, len(events))
	for i, e := range events {
		if e.Name == "" {
			return nil, fmt.Errorf("sdk: SendEvents: events[%d]: name is required", i)
		}
		data, err := wire.CompactJSON(e.Data)
		if err != nil {
			return nil, fmt.Errorf("sdk: SendEvents: events[%d].data: %w", i, err)
		}
		in[i] = eventJSON{Name: e.Name, Data: data, DedupeID: e.DedupeID}
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

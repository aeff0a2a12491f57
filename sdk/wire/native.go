package wire

import (
	"encoding/json"
	"time"
)

// The JSON of Duraton's native API (docs/protocol.md, "Native workflows"): app registration,
// workflow definitions with their flat controls, events and their per-workflow outcomes, and
// the payload a native run's first delivery carries. Times are milliseconds.

// Controls are a workflow's flow controls (docs/protocol.md, "Controls"); a nil control is off.
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
// into the event's data, or a CEL expression over the event such as
// "event.data.orderId"; "" for the whole workflow). Scope "app" shares the limit with
// every workflow of the app that declares the same Key and Limit with scope "app"; ""
// or "workflow" is the workflow's own.
type Concurrency struct {
	Limit int    `json:"limit"`
	Key   string `json:"key,omitempty"`
	Scope string `json:"scope,omitempty"`
}

// Rate is a throttle (delays run starts) or a rateLimit (drops events): Limit per PerMs.
// Burst (throttle only, 1 to Limit; 0 means Limit) is how many starts go at once from
// idle before the steady pace.
type Rate struct {
	Limit int    `json:"limit"`
	PerMs int64  `json:"perMs"`
	Key   string `json:"key,omitempty"`
	Burst int    `json:"burst,omitempty"`
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

// Priority orders the workflow's deliveries as if enqueued ShiftMs earlier; or, with Run
// (a CEL expression over the event), as if enqueued that many seconds earlier, per run
// (an int clamped to ±600).
type Priority struct {
	ShiftMs int64  `json:"shiftMs"`
	Run     string `json:"run,omitempty"`
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

// TokenThrottle limits the AI tokens of a scope per PerMs. Estimate (1 to Tokens) is the
// tokens a run is assumed to spend until the scope has seen runs end; without it the
// scope starts one run at a time until then.
type TokenThrottle struct {
	Tokens   int64  `json:"tokens"`
	PerMs    int64  `json:"perMs"`
	Key      string `json:"key,omitempty"`
	Estimate int64  `json:"estimate,omitempty"`
}

// Trigger starts a workflow: an event name, or a cron schedule (five fields) in the IANA
// zone TZ (UTC when empty), whose fires are events named CronEventName with CronData.
type Trigger struct {
	Event string `json:"event,omitempty"`
	Cron  string `json:"cron,omitempty"`
	TZ    string `json:"tz,omitempty"`
}

// CronEventName names the events of cron fires.
const CronEventName = "duraton/cron"

// CronData is the data of a cron fire's event: the instant it stands for (unix ms), and
// Late when it fires after downtime (only the most recent missed instant fires).
type CronData struct {
	Cron        string `json:"cron"`
	TZ          string `json:"tz,omitempty"`
	ScheduledAt int64  `json:"scheduledAt"`
	Late        bool   `json:"late,omitempty"`
}

// WorkflowDefinition is one workflow of a PUT /apps/{app} body: the controls flat beside
// the fields.
type WorkflowDefinition struct {
	Name     string     `json:"name"`
	URL      string     `json:"url"`
	Triggers []Trigger  `json:"triggers"`
	Retries  *int       `json:"retries,omitempty"`
	CancelOn []CancelOn `json:"cancelOn,omitempty"`
	Controls
}

// CancelOn is an event that cancels the workflow's live runs whose triggering event it
// matches: Match (a dotted path whose values in both events are equal) and If (a CEL
// condition over event, the run's triggering event, and async, the incoming one) must
// both hold when set; TimeoutMs limits it to runs created at most that long before. A
// workflow has at most 8.
type CancelOn struct {
	Event     string `json:"event"`
	Match     string `json:"match,omitempty"`
	If        string `json:"if,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// EventCancel is what one workflow's cancelOn did with an event: the runs it cancelled.
type EventCancel struct {
	Workflow  string   `json:"workflow"`
	Cancelled []string `json:"cancelled"`
}

// AppDefinition is the body of PUT /apps/{app}.
type AppDefinition struct {
	Workflows []WorkflowDefinition `json:"workflows"`
}

// RegisteredWorkflow is a definition as the server stored it, normalized, with its
// controls on FlowControl (GET /workflows).
type RegisteredWorkflow struct {
	App         string     `json:"app"`
	Name        string     `json:"name"`
	URL         string     `json:"url"`
	Triggers    []Trigger  `json:"triggers"`
	Retries     int        `json:"retries"`
	FlowControl Controls   `json:"flowControl"`
	CancelOn    []CancelOn `json:"cancelOn,omitempty"`
	CreatedAt   int64      `json:"createdAt"`
	UpdatedAt   int64      `json:"updatedAt"`
}

// TriggerEvents are the event names that start the workflow.
func (w RegisteredWorkflow) TriggerEvents() []string {
	out := make([]string, 0, len(w.Triggers))
	for _, t := range w.Triggers {
		if t.Event != "" {
			out = append(out, t.Event)
		}
	}
	return out
}

// RegisteredApp is a registered app with its workflows (PUT and GET /apps/{app}).
type RegisteredApp struct {
	Name      string               `json:"name"`
	CreatedAt int64                `json:"createdAt"`
	UpdatedAt int64                `json:"updatedAt"`
	Workflows []RegisteredWorkflow `json:"workflows"`
}

// EventIn is one event of a POST /events body. Ts (unix ms, at most 365 days ahead) or
// Delay (a duration such as "90s") delays its fan-out: at most one of them.
type EventIn struct {
	Name     string          `json:"name"`
	Data     json.RawMessage `json:"data,omitempty"` // left out for none: the server takes it as null
	DedupeID string          `json:"dedupeId,omitempty"`
	Ts       int64           `json:"ts,omitempty"`
	Delay    string          `json:"delay,omitempty"`
}

// EventResult is what the server did with one event: its id and, per workflow whose
// trigger names it, the outcome. Deduped when its dedupeId was seen (ID is then the
// first event's). A delayed event has ScheduledFor (unix ms) and no runs yet.
type EventResult struct {
	ID           string     `json:"id"`
	Deduped      bool       `json:"deduped,omitempty"`
	ScheduledFor int64      `json:"scheduledFor,omitempty"`
	Runs         []EventRun `json:"runs"`
	// Cancelled lists the runs the event cancelled, per workflow whose cancelOn it met.
	Cancelled []EventCancel `json:"cancelled,omitempty"`
}

// Run returns the outcome of the named workflow, false when the event did not match it.
func (r EventResult) Run(workflow string) (EventRun, bool) {
	for _, x := range r.Runs {
		if x.Workflow == workflow {
			return x, true
		}
	}
	return EventRun{}, false
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

// ReceivedEvent is an event as a native run receives it (docs/protocol.md, "Native workflows").
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

// NativePayload is a native run's initial payload: the first event (for a debounce the
// last of the burst) flat, and every event of the run in receive order.
type NativePayload struct {
	ReceivedEvent
	Events []ReceivedEvent `json:"events"`
}

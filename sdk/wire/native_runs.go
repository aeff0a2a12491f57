package wire

import "encoding/json"

// The native API's run views, flow state and bulk answers as clients read them
// (docs/protocol.md, "Native workflows"). Times are unix milliseconds unless named At
// with a string type (RFC 3339).

// NativeRun is a run of a native workflow (GET /runs/{id}, GET /runs).
type NativeRun struct {
	RunID     string               `json:"runId"`
	Workflow  string               `json:"workflow"`
	App       string               `json:"app"`
	Status    string               `json:"status"` // queued, running, sleeping, waiting, succeeded, failed, cancelled
	CreatedAt int64                `json:"createdAt"`
	StartedAt int64                `json:"startedAt,omitempty"`
	EndedAt   int64                `json:"endedAt,omitempty"`
	EventIDs  []string             `json:"eventIds"`
	Keys      map[string]NativeKey `json:"keys"`
	Steps     []NativeStep         `json:"steps"`
	DLQID     string               `json:"dlqId,omitempty"`
	Waiting   *NativeWaiting       `json:"waiting,omitempty"`
	Error     *NativeRunError      `json:"error,omitempty"`
	Cancelled *NativeCancelledBy   `json:"cancelledBy,omitempty"`
	Usage     *AIUsage             `json:"usage,omitempty"`
	Cap       *Cap                 `json:"cap,omitempty"`
}

// NativeKey is one keyed control of a run as resolved when it was created.
type NativeKey struct {
	Path  string          `json:"path,omitempty"`
	Scope string          `json:"scope"` // "key" or "workflow"
	Value json.RawMessage `json:"value,omitempty"`
}

// NativeStep is a recorded step of a run, or the step that failed it (Status "failed").
type NativeStep struct {
	ID        int              `json:"id"`
	Name      string           `json:"name"`
	Type      string           `json:"type"`
	Status    string           `json:"status"`
	StartedAt int64            `json:"startedAt"`
	EndedAt   int64            `json:"endedAt"`
	Out       json.RawMessage  `json:"out,omitempty"` // the step's value as JSON
	Error     *NativeStepError `json:"error,omitempty"`
	Usage     *AIUsage         `json:"usage,omitempty"`
}

// NativeWaiting says why a live run is not running.
type NativeWaiting struct {
	Reason string `json:"reason"`
	Since  int64  `json:"since"`
}

// Codes of a NativeRunError.
const (
	RunErrBudgetExceeded   = "budget_exceeded"
	RunErrRetriesExhausted = "retries_exhausted"
	RunErrNonRetryable     = "non_retryable"
	RunErrTimeout          = "timeout"
	RunErrInvokeFailed     = "invoke_failed"
	RunErrInternal         = "internal"
)

// NativeRunError says why a run failed: a stable Code, the failing Step when known and
// the last HTTP Status its endpoint answered.
type NativeRunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Step    string `json:"step,omitempty"`
	Status  int    `json:"status,omitempty"`
}

// NativeStepError says why a step failed its run.
type NativeStepError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"status,omitempty"`
}

// NativeCancelledBy says who cancelled a run: an event (cancelOn), the singleton run
// that replaced it, or the API.
type NativeCancelledBy struct {
	EventID   string `json:"eventId,omitempty"`
	Singleton string `json:"singleton,omitempty"`
	API       bool   `json:"api,omitempty"`
}

// NativeRunsPage is a page of GET /runs; Cursor is empty on the last page.
type NativeRunsPage struct {
	Runs   []NativeRun `json:"runs"`
	Cursor string      `json:"cursor,omitempty"`
}

// NativeRunStats is GET /runs/stats.
type NativeRunStats struct {
	Active    int  `json:"active"`
	Queued    int  `json:"queued"`
	Running   int  `json:"running"`
	Truncated bool `json:"truncated,omitempty"`
}

// BulkRunsResult is the answer of POST /runs/cancel and POST /runs/replay: the runs the
// filters matched, those acted on, and a cursor when more may match.
type BulkRunsResult struct {
	Matched int    `json:"matched"`
	Done    int    `json:"done"`
	Cursor  string `json:"cursor,omitempty"`
}

// FlowState is GET /flow-state: the workflows' gate backlogs and states and the
// project ceiling (Concurrency.Limit 0: unlimited).
type FlowState struct {
	Debounce      []FlowDebounce      `json:"debounce"`
	Batch         []FlowBatch         `json:"batch"`
	RateLimit     []FlowRateLimit     `json:"rateLimit"`
	Idempotency   []FlowIdempotency   `json:"idempotency"`
	Concurrency   FlowConcurrency     `json:"concurrency"`
	TokenThrottle []FlowTokenThrottle `json:"tokenThrottle"`
	Truncated     bool                `json:"truncated,omitempty"`
}

// FlowDebounce is one workflow's debounce backlog.
type FlowDebounce struct {
	App        string `json:"app"`
	Workflow   string `json:"workflow"`
	Pending    int    `json:"pending"`
	NextFireAt string `json:"nextFireAt"`
}

// FlowBatch is one workflow's batch backlog.
type FlowBatch struct {
	App      string `json:"app"`
	Workflow string `json:"workflow"`
	Buffered int    `json:"buffered"`
	OldestAt string `json:"oldestAt"`
}

// FlowRateLimit is one workflow's rateLimit state.
type FlowRateLimit struct {
	App           string `json:"app"`
	Workflow      string `json:"workflow"`
	Keys          int    `json:"keys"`
	Limited       int    `json:"limited"`
	NextAllowedAt string `json:"nextAllowedAt,omitempty"`
}

// FlowIdempotency is one workflow's idempotency state.
type FlowIdempotency struct {
	App         string `json:"app"`
	Workflow    string `json:"workflow"`
	Keys        int    `json:"keys"`
	NextCloseAt string `json:"nextCloseAt,omitempty"`
}

// FlowConcurrency is the project ceiling and its deliveries in flight.
type FlowConcurrency struct {
	Limit int `json:"limit"`
	InUse int `json:"inUse"`
}

// FlowTokenThrottle is one tokenThrottle bucket (Key the resolved value, strings
// unquoted).
type FlowTokenThrottle struct {
	App          string  `json:"app"`
	Workflow     string  `json:"workflow"`
	Key          string  `json:"key"`
	Tokens       int64   `json:"tokens"`
	Level        float64 `json:"level"`
	NextStartAt  string  `json:"nextStartAt"`
	AvgRunTokens int64   `json:"avgRunTokens"`
}

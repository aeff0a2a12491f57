package storage

import (
	"github.com/duraton/duraton/flowctl"
)

// Message states, stored by name.
const (
	StateCreated   = "CREATED"
	StateActive    = "ACTIVE"
	StateRetry     = "RETRY"
	StateDelivered = "DELIVERED"
	StateError     = "ERROR"
	StateFailed    = "FAILED"
	StateCancelled = "CANCELLED"
)

// Message kinds: what caused a message to exist.
const (
	KindMessage         = "message"
	KindCallback        = "callback"
	KindFailureCallback = "failure_callback"
	// KindWaitTimeout is a timer, not an HTTP request: when due it resolves a workflow
	// wait with a timeout.
	KindWaitTimeout = "wait_timeout"
)

// Message is one pending delivery job: the request to send and how to retry it. Times are
// unix milliseconds except DueAt, which is unix nanoseconds because it orders the due index.
type Message struct {
	ID       string              `json:"id"`
	Project  string              `json:"project"`
	Kind     string              `json:"kind"`
	URL      string              `json:"url"`
	Method   string              `json:"method"`
	Header   map[string][]string `json:"header,omitempty"`
	Body     []byte              `json:"body,omitempty"`
	Queue    string              `json:"queue,omitempty"`
	Labels   []string            `json:"labels,omitempty"`
	CallerIP string              `json:"callerIp,omitempty"`
	// Hops is how many Duraton deliveries the publish of this message descends from (the
	// Duraton-Hops header it arrived with); its deliveries carry Hops+1.
	Hops      int   `json:"hops,omitempty"`
	CreatedAt int64 `json:"createdAt"`
	// OrderAt (unix ns) orders the message among the deliveries of its flow-control key:
	// its run's order (Run.OrderAt: older runs finish first), else CreatedAt.
	OrderAt     int64           `json:"orderAt,omitempty"`
	NotBefore   int64           `json:"notBefore"`
	DueAt       int64           `json:"dueAt"`
	State       string          `json:"state"`
	Retries     int             `json:"retries"`
	Retried     int             `json:"retried"`
	RetryDelay  string          `json:"retryDelay,omitempty"`
	TimeoutMs   int64           `json:"timeoutMs,omitempty"`
	DedupID     string          `json:"dedupId,omitempty"`
	FlowControl *flowctl.Config `json:"flowControl,omitempty"`
	// FlowExtra are further flow-control keys whose slots every delivery also holds (a
	// native workflow's second concurrency constraint): only their parallelism applies.
	FlowExtra []flowctl.Config `json:"flowExtra,omitempty"`
	// PriorityShiftMs is the run's priority shift (OrderAt already includes it): the
	// rings in which keys take turns rank a waiting key by its head's shift.
	PriorityShiftMs int64 `json:"priorityShiftMs,omitempty"`
	// StartGate is a run's start gate (a native throttle), on its first delivery until
	// the delivery is admitted.
	StartGate *StartGate `json:"startGate,omitempty"`
	// TokenGate is a run's token gate (a native tokenThrottle), on its first delivery.
	TokenGate *TokenGate `json:"tokenGate,omitempty"`

	// Callback and FailureCallback describe the messages to create after each attempt and
	// after the final failure.
	Callback        *CallbackSpec `json:"callback,omitempty"`
	FailureCallback *CallbackSpec `json:"failureCallback,omitempty"`

	// SourceMessageID links a callback message to the message whose attempt it reports.
	SourceMessageID string `json:"sourceMessageId,omitempty"`
	// ScheduleID names the schedule whose tick published the message.
	ScheduleID string `json:"scheduleId,omitempty"`
	// TopicName and EndpointName name the URL group (and its endpoint) the message was
	// fanned out to.
	TopicName    string `json:"topicName,omitempty"`
	EndpointName string `json:"endpointName,omitempty"`
	// Redact says what the API must not show of the message (Upstash-Redact-Fields). The
	// delivery itself is unchanged.
	Redact *Redaction `json:"redact,omitempty"`

	// Workflow fields. RunID binds the message to a run; CallType is its history call
	// type. HistoryLen > 0 means the delivered body is the run's history up to and
	// including this message's own entry (docs/protocol.md, "Workflow runs"), not Body.
	// DetectTrigger marks a run's first delivery, whose answer must carry
	// Upstash-Workflow-Sdk-Version.
	// EventID names the event a KindWaitTimeout timer belongs to.
	RunID         string `json:"runId,omitempty"`
	CallType      string `json:"callType,omitempty"`
	HistoryLen    int    `json:"historyLen,omitempty"`
	DetectTrigger bool   `json:"detectTrigger,omitempty"`
	EventID       string `json:"eventId,omitempty"`
	// AICall marks a workflow call the SDK declared an AI step (Duraton-Ai header);
	// AIUsage is carried by the callback that reports a metered AI call, for its history
	// entry.
	AICall  bool             `json:"aiCall,omitempty"`
	AIUsage *flowctl.AIUsage `json:"aiUsage,omitempty"`
}

// Redaction is Upstash-Redact-Fields: the body, every header, or the named headers
// (canonical names).
type Redaction struct {
	Body       bool     `json:"body,omitempty"`
	AllHeaders bool     `json:"allHeaders,omitempty"`
	Headers    []string `json:"headers,omitempty"`
}

// CallbackSpec is the configuration of a callback or failure-callback message, taken from
// the Upstash-Callback-* / Upstash-Failure-Callback-* headers at publish time.
type CallbackSpec struct {
	URL         string              `json:"url"`
	Method      string              `json:"method"`
	Header      map[string][]string `json:"header,omitempty"`
	Retries     int                 `json:"retries"`
	RetryDelay  string              `json:"retryDelay,omitempty"`
	TimeoutMs   int64               `json:"timeoutMs,omitempty"`
	DelayMs     int64               `json:"delayMs,omitempty"`
	FlowControl *flowctl.Config     `json:"flowControl,omitempty"`
	// RunID and CallType bind the callback message to a workflow run
	// (Upstash-Callback-Workflow-RunId, -Workflow-CallType).
	RunID    string `json:"runId,omitempty"`
	CallType string `json:"callType,omitempty"`
}

// Response is what an endpoint answered to one attempt (body truncated to the read limit).
type Response struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
	Error  string              `json:"error,omitempty"`
}

// LogEvent is one state change of a message, listed by the logs API newest first.
type LogEvent struct {
	ID               string              `json:"id"`
	Time             int64               `json:"time"`
	State            string              `json:"state"`
	MessageID        string              `json:"messageId"`
	URL              string              `json:"url"`
	Queue            string              `json:"queueName,omitempty"`
	Labels           []string            `json:"labels,omitempty"`
	ScheduleID       string              `json:"scheduleId,omitempty"`
	TopicName        string              `json:"topicName,omitempty"`
	EndpointName     string              `json:"endpointName,omitempty"`
	Error            string              `json:"error,omitempty"`
	NextDeliveryTime int64               `json:"nextDeliveryTime,omitempty"`
	ResponseStatus   int                 `json:"responseStatus,omitempty"`
	ResponseHeader   map[string][]string `json:"responseHeader,omitempty"`
	ResponseBody     []byte              `json:"responseBody,omitempty"`
	Retried          int                 `json:"retried"`
}

// DLQEntry is a message whose retries are exhausted (or that failed non-retryably),
// together with the last answer of its endpoint.
type DLQEntry struct {
	DLQID    string   `json:"dlqId"`
	FailedAt int64    `json:"failedAt"`
	Message  Message  `json:"message"`
	Response Response `json:"response"`
}

// Queue is a named FIFO with its own parallelism.
type Queue struct {
	Name        string `json:"name"`
	Parallelism int    `json:"parallelism"`
	Paused      bool   `json:"paused"`
	CreatedAt   int64  `json:"createdAt"`
	UpdatedAt   int64  `json:"updatedAt"`
}

// DedupRecord remembers a deduplication id until it expires.
type DedupRecord struct {
	MessageID string `json:"messageId"`
	ExpiresAt int64  `json:"expiresAt"`
}

// Project is a tenant: its API tokens point at it and its signing keys sign its deliveries.
type Project struct {
	ID                string `json:"id"`
	Name              string `json:"name"`
	CreatedAt         int64  `json:"createdAt"`
	CurrentSigningKey string `json:"currentSigningKey"`
	NextSigningKey    string `json:"nextSigningKey"`
	// UserID is the id workflow webhooks name the project by (the "UserID" inside its
	// tokens, which the workflow SDK puts into webhook URLs).
	UserID string `json:"userId,omitempty"`
}

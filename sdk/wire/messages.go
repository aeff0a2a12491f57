package wire

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"unicode/utf8"
)

// The JSON the QStash API answers about messages, logs, dead letters and queues (protocol
// §2). The server encodes these types and the SDK decodes them (the SDK re-exports them
// under the same names). Times are unix milliseconds unless said otherwise.

// Message is a stored message as GET /v2/messages/{id} shows it.
type Message struct {
	MessageID string      `json:"messageId"`
	URL       string      `json:"url"`
	Method    string      `json:"method"`
	Header    http.Header `json:"header,omitempty"`
	// Body is the body when it is valid UTF-8, else BodyBase64 holds it; see Bytes.
	Body                 string   `json:"body,omitempty"`
	BodyBase64           string   `json:"bodyBase64,omitempty"`
	MaxRetries           int      `json:"maxRetries"`
	Retried              int      `json:"retried"`
	RetryDelayExpression string   `json:"retryDelayExpression,omitempty"`
	Timeout              int64    `json:"timeout,omitempty"` // seconds
	NotBefore            int64    `json:"notBefore"`
	CreatedAt            int64    `json:"createdAt"`
	State                string   `json:"state"`
	Callback             string   `json:"callback,omitempty"`
	FailureCallback      string   `json:"failureCallback,omitempty"`
	QueueName            string   `json:"queueName,omitempty"`
	Label                string   `json:"label,omitempty"` // the first of Labels (legacy)
	Labels               []string `json:"labels,omitempty"`
	CallerIP             string   `json:"callerIP,omitempty"`
	ScheduleID           string   `json:"scheduleId,omitempty"`   // set on a schedule's ticks
	TopicName            string   `json:"topicName,omitempty"`    // the URL group it was published to
	EndpointName         string   `json:"endpointName,omitempty"` // the group's endpoint
	FlowControlKey       string   `json:"flowControlKey,omitempty"`
	Parallelism          int      `json:"parallelism,omitempty"`
	Rate                 int      `json:"rate,omitempty"`
	Period               int64    `json:"period,omitempty"` // seconds
	// Waiting is set while the message is due but held by flow control.
	Waiting *Waiting `json:"waiting,omitempty"`
}

// Bytes returns the message body, decoding BodyBase64 when the body is not text.
func (m *Message) Bytes() ([]byte, error) { return BodyBytes(m.Body, m.BodyBase64) }

// BodyFields shows a body as the API does: as text when it is valid UTF-8, else as
// standard base64 (the second result).
func BodyFields(b []byte) (text, b64 string) {
	if len(b) == 0 {
		return "", ""
	}
	if utf8.Valid(b) {
		return string(b), ""
	}
	return "", base64.StdEncoding.EncodeToString(b)
}

// BodyBytes is the inverse of BodyFields.
func BodyBytes(text, b64 string) ([]byte, error) {
	if b64 != "" {
		return base64.StdEncoding.DecodeString(b64)
	}
	return []byte(text), nil
}

// Waiting says why a due delivery has not started yet (a flow-control waitlist) and
// since when (unix ms). Reason is meant for people; do not parse it.
type Waiting struct {
	Reason string `json:"reason"`
	Since  int64  `json:"since"`
}

// Log is one log event of a message (created, delivered, retried, failed, ...).
type Log struct {
	Time             int64    `json:"time"`
	State            string   `json:"state"`
	MessageID        string   `json:"messageId"`
	URL              string   `json:"url"`
	QueueName        string   `json:"queueName,omitempty"`
	Label            string   `json:"label,omitempty"`
	Labels           []string `json:"labels,omitempty"`
	ScheduleID       string   `json:"scheduleId,omitempty"`
	TopicName        string   `json:"topicName,omitempty"`
	EndpointName     string   `json:"endpointName,omitempty"`
	Error            string   `json:"error,omitempty"`
	NextDeliveryTime int64    `json:"nextDeliveryTime,omitempty"`
	ResponseStatus   int      `json:"responseStatus,omitempty"`
	// ResponseHeader and the body of the endpoint's answer (text, or base64 when it is
	// not valid UTF-8).
	ResponseHeader     http.Header `json:"responseHeader,omitempty"`
	ResponseBody       string      `json:"responseBody,omitempty"`
	ResponseBodyBase64 string      `json:"responseBodyBase64,omitempty"`
	Retried            int         `json:"retried"`
}

// LogsPage is one page of log events, newest first. Cursor is empty on the last page.
type LogsPage struct {
	Cursor string `json:"cursor,omitempty"`
	Events []Log  `json:"events"`
}

// DLQMessage is a dead letter: the message plus its last answer.
type DLQMessage struct {
	Message
	DLQID    string `json:"dlqId"`
	FailedAt int64  `json:"failedAt"`
	// ResponseStatus of the last answer (0 when there was none; see Error).
	ResponseStatus int         `json:"responseStatus"`
	ResponseHeader http.Header `json:"responseHeader,omitempty"`
	// ResponseBody is the last answer when it is valid UTF-8, else ResponseBodyBase64.
	ResponseBody       string `json:"responseBody,omitempty"`
	ResponseBodyBase64 string `json:"responseBodyBase64,omitempty"`
	// Error says why the last attempt failed when there was no usable answer.
	Error string `json:"error,omitempty"`
}

// DLQPage is one page of dead letters, newest first. Cursor is empty on the last page.
type DLQPage struct {
	Cursor   string       `json:"cursor,omitempty"`
	Messages []DLQMessage `json:"messages"`
}

// DeleteResult answers a bulk delete of dead letters: how many went, and where the next
// page of the selection starts.
type DeleteResult struct {
	Deleted int    `json:"deleted"`
	Cursor  string `json:"cursor,omitempty"`
}

// RetryResult answers POST /v2/dlq/retry: the messages published again.
type RetryResult struct {
	Responses []PublishResult `json:"responses"`
	Cursor    string          `json:"cursor,omitempty"`
}

// CancelResult answers a cancel of messages or workflow runs.
type CancelResult struct {
	Cancelled int `json:"cancelled"`
}

// PublishResult is the server's answer to one published message.
type PublishResult struct {
	// MessageID is the new message, or the original one when Deduplicated.
	MessageID string `json:"messageId"`
	// URL is the destination as stored.
	URL string `json:"url,omitempty"`
	// Deduplicated is true when an earlier message with the same dedup id was found.
	Deduplicated bool `json:"deduplicated,omitempty"`
}

// BatchEntry is one message of POST /v2/batch. Header names are lower-case, one value
// per name (repeated values joined with ", "). An absent body is an empty one; a body
// that is JSON but not a string (an object, as @upstash/workflow's context.call sends one)
// is that JSON's text.
type BatchEntry struct {
	Destination string            `json:"destination"`
	Headers     map[string]string `json:"headers,omitempty"`
	Body        string            `json:"body,omitempty"`
	Queue       string            `json:"queue,omitempty"`
}

// UnmarshalJSON reads an entry whose body may be any JSON value (see BatchEntry).
func (e *BatchEntry) UnmarshalJSON(b []byte) error {
	type plain BatchEntry
	var aux struct {
		plain
		Body json.RawMessage `json:"body,omitempty"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*e = BatchEntry(aux.plain)
	switch body := aux.Body; {
	case len(body) == 0 || string(body) == "null":
		e.Body = ""
	case body[0] == '"':
		return json.Unmarshal(body, &e.Body)
	default:
		e.Body = string(body)
	}
	return nil
}

// Queue is a named queue: its messages are delivered in order, at most Parallelism at
// once.
type Queue struct {
	Name        string `json:"name"`
	Parallelism int    `json:"parallelism"`
	Paused      bool   `json:"paused"`
	// Lag is the number of messages of the queue parked or in flight.
	Lag       int   `json:"lag"`
	CreatedAt int64 `json:"createdAt"`
	UpdatedAt int64 `json:"updatedAt"`
}

// FlowControlInfo is the state of one flow-control key (GET /v2/flowControl/{key}).
type FlowControlInfo struct {
	Key string `json:"flowControlKey"`
	// WaitListSize is the number of due deliveries waiting for the key's limits or pause.
	WaitListSize int `json:"waitListSize"`
	// ParallelismMax is the parallelism in force (0: none); ParallelismCount the
	// deliveries of the key in flight.
	ParallelismMax   int `json:"parallelismMax"`
	ParallelismCount int `json:"parallelismCount"`
	// RateMax is the rate in force per RatePeriod seconds (0: none); RateCount the
	// deliveries started within the last period, the oldest at RatePeriodStart (unix ms,
	// 0 when the window is empty).
	RateMax             int   `json:"rateMax"`
	RateCount           int   `json:"rateCount"`
	RatePeriod          int64 `json:"ratePeriod"`
	RatePeriodStart     int64 `json:"ratePeriodStart"`
	IsPaused            bool  `json:"isPaused"`
	IsPinnedParallelism bool  `json:"isPinnedParallelism"`
	IsPinnedRate        bool  `json:"isPinnedRate"`
}

// GlobalParallelism is the project's ceiling on deliveries in flight (0: none) and the
// deliveries in flight now.
type GlobalParallelism struct {
	Max   int `json:"parallelismMax"`
	Count int `json:"parallelismCount"`
}

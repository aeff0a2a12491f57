package wire

import "net/http"

// CallbackPayload is the JSON body of callbacks (docs/protocol.md, "Callbacks and failure
// callbacks") and failure callbacks (§4.5): the server builds it from an attempt's outcome,
// the SDK reads it in a call's callback and in the failure function. Header maps use
// Go-canonical names and array values; bodies are standard base64.
type CallbackPayload struct {
	Status          int         `json:"status"`
	Header          http.Header `json:"header"`
	Body            string      `json:"body"`
	Retried         int         `json:"retried"`
	MaxRetries      int         `json:"maxRetries"`
	DLQID           string      `json:"dlqId,omitempty"`
	SourceMessageID string      `json:"sourceMessageId"`
	URL             string      `json:"url"`
	Method          string      `json:"method"`
	SourceHeader    http.Header `json:"sourceHeader"`
	SourceBody      string      `json:"sourceBody"`
	NotBefore       int64       `json:"notBefore"`
	CreatedAt       int64       `json:"createdAt"`
	ScheduleID      string      `json:"scheduleId"`
	CallerIP        string      `json:"callerIP"`
	TopicName       string      `json:"topicName"`
	EndpointName    string      `json:"endpointName"`
	Error           string      `json:"error,omitempty"`
	// Workflow failure callbacks only (§4.5).
	WorkflowRunID     string `json:"workflowRunId,omitempty"`
	WorkflowCreatedAt int64  `json:"workflowCreatedAt,omitempty"`
}

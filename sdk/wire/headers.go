package wire

import "net/http"

// Header names of the QStash v2 protocol (upstash-protocol.md §3 and §4). Go's canonical
// MIME form is used; lookups through http.Header are case-insensitive anyway.
const (
	// Publish-time headers (client → server).
	HeaderMethod                  = "Upstash-Method"
	HeaderDelay                   = "Upstash-Delay"
	HeaderNotBefore               = "Upstash-Not-Before"
	HeaderRetries                 = "Upstash-Retries"
	HeaderRetryDelay              = "Upstash-Retry-Delay"
	HeaderTimeout                 = "Upstash-Timeout"
	HeaderCallback                = "Upstash-Callback"
	HeaderFailureCallback         = "Upstash-Failure-Callback"
	HeaderDeduplicationID         = "Upstash-Deduplication-Id"
	HeaderContentBasedDedup       = "Upstash-Content-Based-Deduplication"
	HeaderLabel                   = "Upstash-Label"
	HeaderFlowControlKey          = "Upstash-Flow-Control-Key"
	HeaderFlowControlValue        = "Upstash-Flow-Control-Value"
	HeaderQueueName               = "Upstash-Queue-Name"
	HeaderFeatureSet              = "Upstash-Feature-Set"
	HeaderRedactFields            = "Upstash-Redact-Fields"
	HeaderCron                    = "Upstash-Cron"        // schedules only
	HeaderScheduleID              = "Upstash-Schedule-Id" // schedules; also sent on their deliveries
	PrefixForward                 = "Upstash-Forward-"
	PrefixCallback                = "Upstash-Callback-"
	PrefixFailureCallback         = "Upstash-Failure-Callback-"
	PrefixTelemetry               = "Upstash-Telemetry-"
	HeaderWorkflowRunID           = "Upstash-Workflow-Runid"
	HeaderWorkflowInit            = "Upstash-Workflow-Init"
	HeaderWorkflowURL             = "Upstash-Workflow-Url"
	HeaderWorkflowCallType        = "Upstash-Workflow-Calltype"
	HeaderWorkflowSdkVersion      = "Upstash-Workflow-Sdk-Version"
	HeaderWorkflowCreatedAt       = "Upstash-Workflow-Createdat"
	HeaderWorkflowInvoke          = "Upstash-Workflow-Invoke"
	HeaderContentType             = "Content-Type"
	HeaderAuthorization           = "Authorization"
	HeaderRetryAfter              = "Retry-After"
	HeaderNonRetryableError       = "Upstash-Nonretryable-Error"
	HeaderUserAgent               = "User-Agent"
	UserAgent                     = "Upstash-QStash"
	DefaultMethod                 = "POST"
	DefaultContentTypeForWorkflow = "application/json"

	// Delivery headers (server → endpoint).
	HeaderSignature = "Upstash-Signature"
	HeaderMessageID = "Upstash-Message-Id"
	HeaderRetried   = "Upstash-Retried"
)

// IsHopByHop reports whether a header must never be forwarded to a destination: it
// describes the connection or the framing of the original request, not the message
// (protocol §4.1). name may be in any case.
func IsHopByHop(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Host", "Content-Length", "Connection", "Transfer-Encoding", "Keep-Alive", "Upgrade",
		"Te", "Trailer", "Expect", "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate":
		return true
	}
	return false
}

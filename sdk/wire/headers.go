package wire

import "net/http"

// Header names of the QStash v2 protocol (docs/protocol.md, "Requests to Duraton" and
// "Deliveries"). Go's canonical MIME form is used; lookups through http.Header are
// case-insensitive anyway.
const (
	// Publish-time headers (client → server).
	HeaderMethod             = "Upstash-Method"
	HeaderDelay              = "Upstash-Delay"
	HeaderNotBefore          = "Upstash-Not-Before"
	HeaderRetries            = "Upstash-Retries"
	HeaderRetryDelay         = "Upstash-Retry-Delay"
	HeaderTimeout            = "Upstash-Timeout"
	HeaderCallback           = "Upstash-Callback"
	HeaderFailureCallback    = "Upstash-Failure-Callback"
	HeaderDeduplicationID    = "Upstash-Deduplication-Id"
	HeaderContentBasedDedup  = "Upstash-Content-Based-Deduplication"
	HeaderLabel              = "Upstash-Label"
	HeaderFlowControlKey     = "Upstash-Flow-Control-Key"
	HeaderFlowControlValue   = "Upstash-Flow-Control-Value"
	HeaderQueueName          = "Upstash-Queue-Name"
	HeaderFeatureSet         = "Upstash-Feature-Set"
	HeaderRedactFields       = "Upstash-Redact-Fields"
	HeaderCron               = "Upstash-Cron"        // schedules only
	HeaderScheduleID         = "Upstash-Schedule-Id" // schedules; also sent on their deliveries
	PrefixForward            = "Upstash-Forward-"
	PrefixCallback           = "Upstash-Callback-"
	PrefixFailureCallback    = "Upstash-Failure-Callback-"
	PrefixTelemetry          = "Upstash-Telemetry-"
	HeaderWorkflowRunID      = "Upstash-Workflow-Runid"
	HeaderWorkflowInit       = "Upstash-Workflow-Init"
	HeaderWorkflowURL        = "Upstash-Workflow-Url"
	HeaderWorkflowCallType   = "Upstash-Workflow-Calltype"
	HeaderWorkflowSdkVersion = "Upstash-Workflow-Sdk-Version"
	// HeaderErrorStepName names the step that failed, on an endpoint's failing answer.
	HeaderErrorStepName           = "Upstash-Error-Step-Name"
	HeaderWorkflowCreatedAt       = "Upstash-Workflow-Createdat"
	HeaderWorkflowInvoke          = "Upstash-Workflow-Invoke"
	HeaderWorkflowInvokeCount     = "Upstash-Workflow-Invoke-Count"
	PrefixWorkflow                = "Upstash-Workflow-"
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
	// HeaderHops counts the Duraton deliveries a request descends from: a delivery carries
	// its message's count + 1, and a publish that arrives with it gives its messages that
	// count (Duraton's own header; the server refuses requests at its hop limit).
	HeaderHops = "Duraton-Hops"
	// HeaderDuratonWorkflow and HeaderDuratonApp name the native workflow (and its app)
	// on every delivery of a run started by an event (docs/protocol.md, "Native workflows").
	HeaderDuratonWorkflow = "Duraton-Workflow"
	HeaderDuratonApp      = "Duraton-App"
	// HeaderNotifyPartial ("true") on the answer of POST /v2/notify/{eventId} says that
	// the notify woke only the first of the event's waiters (a notify wakes at most
	// 1,000) and more are waiting: notifying again wakes the next ones. The body keeps
	// the shape the SDKs read.
	HeaderNotifyPartial = "Duraton-Notify-Partial"
	// HeaderWaitIf on a wait step's request (POST /v2/wait/{eventId}) is the wait's
	// condition: a CEL expression over `event` (the run's triggering event) and `async`
	// (the incoming one); an event wakes the wait only when it holds. A match on a path
	// is sent as WaitMatchIf(path), which the server indexes.
	HeaderWaitIf = "Duraton-Wait-If"
	// HeaderAI on a workflow call's publish (Duraton's protocol extension) marks the call
	// an AI step, metered and capped whatever its URL path; the value names the API shape
	// ("openai" or "anthropic"). The Go SDK's AI step sets it.
	HeaderAI = "Duraton-Ai"
	// HeaderInline on a delivery to a run's workflow URL offers the inline answer, Duraton's
	// protocol extension: instead of publishing its next steps (POST /v2/batch) or ending
	// the run (DELETE /v2/workflows/runs/{id}) and then answering, the endpoint may answer
	// 2xx with HeaderInline: InlineSteps and the batch's JSON array as the body, or
	// HeaderInline: InlineEnd and the run's result as the body. Duraton records the
	// answer and the delivery's outcome in one transaction. The offer's value is the most
	// bytes such an answer may have; an endpoint that does not know the header ignores it.
	HeaderInline = "Duraton-Inline"
	// InlineSteps and InlineEnd are the kinds of an inline answer (HeaderInline's value on
	// the answer).
	InlineSteps = "steps"
	InlineEnd   = "end"
	// HeaderInlineSteps on an InlineEnd answer: its body begins with this many bytes of
	// step messages (a /v2/batch JSON array), recorded in the run's history, not
	// delivered, before the run ends; the rest of the body is the result. The Go SDK
	// answers so when a run's last step and its end fall in one delivery.
	HeaderInlineSteps = "Duraton-Inline-Steps"

	// Workflow delivery headers (server → endpoint, docs/protocol.md, "Workflow runs").
	// HeaderWorkflowUnknownSdk marks the first delivery of a run triggered without an SDK
	// (POST /v2/trigger); the endpoint's SDK answers by re-publishing the run's init with
	// HeaderWorkflowTriggerBySDK, and the run goes on from that message.
	HeaderWorkflowUnknownSdk   = "Upstash-Workflow-Unknown-Sdk"
	HeaderWorkflowTriggerBySDK = "Upstash-Workflow-Trigger-By-Sdk"
	// HeaderWorkflowCallback and HeaderWorkflowFailureCallback ("true") mark a call's
	// callback and a run's failure callback; the SDK forwards them on its publishes.
	HeaderWorkflowCallback        = "Upstash-Workflow-Callback"
	HeaderWorkflowFailureCallback = "Upstash-Workflow-Failure-Callback"
	HeaderWorkflowStepID          = "Upstash-Workflow-Stepid"
	HeaderWorkflowStepName        = "Upstash-Workflow-Stepname"
	HeaderWorkflowStepType        = "Upstash-Workflow-Steptype"
	HeaderWorkflowConcurrent      = "Upstash-Workflow-Concurrent"
	HeaderWorkflowContentType     = "Upstash-Workflow-Contenttype"

	// Endpoint answer headers (endpoint → server).
	// HeaderWorkflowFailureCallbackNotFound says the endpoint has no failure function.
	HeaderWorkflowFailureCallbackNotFound = "Upstash-Workflow-Failure-Callback-Notfound"
)

// Values of workflow headers.
const (
	// SdkVersion is the workflow protocol version of Upstash-Workflow-Sdk-Version.
	SdkVersion = "1"
	// FeatureDetectTrigger (in Upstash-Feature-Set) makes a first delivery answered
	// without Upstash-Workflow-Sdk-Version fail the run.
	FeatureDetectTrigger = "WF_DetectTrigger"
	// FeatureSet is what the SDKs announce on workflow messages (docs/protocol.md, "Steps").
	FeatureSet = "LazyFetch,InitialBody," + FeatureDetectTrigger + ",WF_TriggerOnConfig"
	// Call types of Upstash-Workflow-Calltype (docs/protocol.md, "Steps"); storage persists the same
	// names.
	CallTypeStep         = "step"
	CallTypeToCallback   = "toCallback"
	CallTypeFromCallback = "fromCallback"
	CallTypeFailure      = "failureCall"
)

// IsHopByHop reports whether a header must never be forwarded to a destination: it
// describes the connection or the framing of the original request, not the message
// (docs/protocol.md, "Deliveries"). name may be in any case.
func IsHopByHop(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Host", "Content-Length", "Connection", "Transfer-Encoding", "Keep-Alive", "Upgrade",
		"Te", "Trailer", "Expect", "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate":
		return true
	}
	return false
}

// WaitMatchIf is the condition form of a wait's match on a dotted path ("data.orderId"):
// the incoming event's value there equals the run's triggering event's.
func WaitMatchIf(path string) string { return "async." + path + " == event." + path }

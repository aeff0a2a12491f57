package sdk

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duraton/duraton/sdk/wire"
)

// Workflow trigger constants (docs/protocol.md, "Starting a run").
const (
	// RunIDPrefix starts every workflow run id.
	RunIDPrefix = "wfr_"
	// defaultRunRetries is the server's retry default; the official SDK omits it.
	defaultRunRetries = 3
)

// TriggerRequest starts one workflow run. Only URL is required. Retries, RetryDelay,
// FlowControl, Labels, Headers and the failure callback apply to every delivery of the run
// (WF_TriggerOnConfig).
type TriggerRequest struct {
	// URL is the workflow endpoint (served by this SDK's handler or an official SDK).
	URL string
	// Body is the run's initial payload. When nil, BodyJSON (if set) is encoded as JSON.
	// The payload must be valid UTF-8 (it travels inside the /v2/batch JSON).
	Body     []byte
	BodyJSON any
	// ContentType of the payload. Default: Headers' Content-Type, else application/json.
	ContentType string
	// RunID names the run; RunIDPrefix is added when missing. Default: a random id. A run
	// id that is still live is not started again (TriggerResult.Deduplicated).
	RunID string
	// Headers are delivered with every delivery of the run (and its failure callback).
	Headers http.Header
	// Retries of each delivery of the run. Nil: the server's default (3).
	Retries *int
	// RetryDelay is an expression of the delay before a retry in milliseconds (variable
	// "retried").
	RetryDelay string
	// Delay of the run's first delivery (whole seconds, rounded up); NotBefore, when set,
	// wins over it.
	Delay     time.Duration
	NotBefore time.Time
	// Labels tag the run for filtering logs, the DLQ and Cancel.
	Labels []string
	// FlowControl limits every delivery of the run.
	FlowControl *FlowControl
	// FailureURL receives the run's failure callback. Default: URL (the endpoint's
	// failure function).
	FailureURL string

	// adopt marks the handler's answer to a run triggered without an SDK: the init of that run,
	// re-published with upstash-workflow-trigger-by-sdk (docs/protocol.md, "Starting a run").
	adopt bool
}

// TriggerResult is the answer to one trigger.
type TriggerResult struct {
	// RunID is the run's id, with RunIDPrefix.
	RunID string
	// MessageID is the run's first message.
	MessageID string
	// Deduplicated is true when a live run with RunID already existed: nothing started.
	Deduplicated bool
}

// Trigger starts a workflow run the way the official workflow Client does (protocol
// §5.1(a)): one POST /v2/batch entry with the workflow headers.
func (c *Client) Trigger(ctx context.Context, req TriggerRequest) (TriggerResult, error) {
	res, err := c.TriggerMany(ctx, []TriggerRequest{req})
	if err != nil {
		return TriggerResult{}, err
	}
	return res[0], nil
}

// TriggerMany starts several workflow runs in one atomic batch; the results are in the
// order of reqs.
func (c *Client) TriggerMany(ctx context.Context, reqs []TriggerRequest) ([]TriggerResult, error) {
	if len(reqs) == 0 {
		return nil, errEmpty("Trigger", "at least one request")
	}
	entries := make([]batchEntry, len(reqs))
	out := make([]TriggerResult, len(reqs))
	for i := range reqs {
		entry, runID, err := triggerEntry(&reqs[i])
		if err != nil {
			return nil, err
		}
		entries[i], out[i].RunID = entry, runID
	}
	results, err := c.batch(ctx, entries)
	if err != nil {
		return nil, err
	}
	for i, r := range results {
		out[i].MessageID, out[i].Deduplicated = r.MessageID, r.Deduplicated
	}
	return out, nil
}

// triggerEntry builds the batch entry of one trigger, header names lower-case as the
// official SDK sends them.
func triggerEntry(req *TriggerRequest) (batchEntry, string, error) {
	if req.URL == "" {
		return batchEntry{}, "", errEmpty("Trigger", "URL")
	}
	body := req.Body
	if body == nil && req.BodyJSON != nil {
		var err error
		if body, err = wire.CompactJSON(req.BodyJSON); err != nil {
			return batchEntry{}, "", fmt.Errorf("sdk: Trigger: encode body: %w", err)
		}
	}
	if !utf8.Valid(body) {
		return batchEntry{}, "", fmt.Errorf("sdk: Trigger: body is not valid UTF-8")
	}
	runID := req.RunID
	switch {
	case runID == "":
		runID = newRunID()
	case !strings.HasPrefix(runID, RunIDPrefix):
		runID = RunIDPrefix + runID
	}
	failureURL := req.FailureURL
	if failureURL == "" {
		failureURL = req.URL
	}

	fcb := func(name string) string { return nestedHeader(wire.PrefixFailureCallback, name) }
	h := map[string]string{
		batchHeader(wire.HeaderWorkflowInit):                            "true",
		batchHeader(wire.HeaderWorkflowRunID):                           runID,
		batchHeader(wire.HeaderWorkflowURL):                             req.URL,
		batchHeader(wire.HeaderFeatureSet):                              wire.FeatureSet,
		batchHeader(wire.HeaderWorkflowSdkVersion):                      wire.SdkVersion,
		batchHeader(wire.PrefixForward + wire.HeaderWorkflowSdkVersion): wire.SdkVersion,
		batchHeader(wire.HeaderMethod):                                  http.MethodPost,

		batchHeader(wire.HeaderFailureCallback):                      failureURL,
		fcb(wire.PrefixForward + wire.PrefixWorkflow + "Is-Failure"): "true",
		fcb(wire.PrefixForward + wire.HeaderWorkflowFailureCallback): "true",
		fcb(wire.HeaderWorkflowRunID):                                runID,
		fcb(wire.HeaderWorkflowInit):                                 "false",
		fcb(wire.HeaderWorkflowURL):                                  req.URL,
		fcb(wire.HeaderWorkflowCallType):                             wire.CallTypeFailure,
		fcb(wire.HeaderFeatureSet):                                   wire.FeatureSet,
	}
	if req.adopt {
		h[batchHeader(wire.HeaderWorkflowTriggerBySDK)] = "true"
	}
	// set puts a run setting on the trigger and mirrors it on the failure callback.
	set := func(name, value string) {
		h[batchHeader(name)] = value
		h[fcb(name)] = value
	}
	if req.Retries != nil && *req.Retries != defaultRunRetries {
		set(wire.HeaderRetries, strconv.Itoa(*req.Retries))
	}
	if req.RetryDelay != "" {
		set(wire.HeaderRetryDelay, req.RetryDelay)
	}
	if fc := req.FlowControl; fc != nil {
		if err := fc.validate(); err != nil {
			return batchEntry{}, "", err
		}
		set(wire.HeaderFlowControlKey, fc.Key)
		set(wire.HeaderFlowControlValue, fc.value())
	}
	// User headers (and the label, which the official SDK adds to them) are forwarded
	// on the trigger and on the failure callback.
	for name, values := range req.Headers {
		set(wire.PrefixForward+name, strings.Join(values, ", "))
	}
	if len(req.Labels) > 0 {
		label := strings.Join(req.Labels, ",")
		for _, l := range req.Labels {
			if !validLabel(l) {
				return batchEntry{}, "", fmt.Errorf("sdk: Trigger: label %q: want [a-zA-Z0-9-_.]+", l)
			}
		}
		set(wire.PrefixForward+wire.HeaderLabel, label)
		h[batchHeader(wire.HeaderLabel)] = label
	}
	contentType := req.ContentType
	if contentType == "" {
		contentType = req.Headers.Get(wire.HeaderContentType)
	}
	if contentType == "" {
		contentType = "application/json"
	}
	h[batchHeader(wire.HeaderContentType)] = contentType
	if req.Delay > 0 {
		h[batchHeader(wire.HeaderDelay)] = seconds(req.Delay)
	}
	if !req.NotBefore.IsZero() {
		h[batchHeader(wire.HeaderNotBefore)] = strconv.FormatInt(req.NotBefore.Unix(), 10)
	}
	return batchEntry{Destination: req.URL, Headers: h, Body: string(body)}, runID, nil
}

// newRunID returns a fresh random run id with RunIDPrefix.
func newRunID() string { return RunIDPrefix + rand.Text() }

// validLabel reports whether l matches ^[a-zA-Z0-9\-_.]+$.
func validLabel(l string) bool {
	if l == "" {
		return false
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

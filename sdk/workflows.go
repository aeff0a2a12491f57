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

// Workflow trigger constants (protocol §5.1).
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

	h := map[string]string{
		"upstash-workflow-init":                        "true",
		"upstash-workflow-runid":                       runID,
		"upstash-workflow-url":                         req.URL,
		"upstash-feature-set":                          wire.FeatureSet,
		"upstash-workflow-sdk-version":                 "1",
		"upstash-forward-upstash-workflow-sdk-version": "1",
		"upstash-method":                               http.MethodPost,

		"upstash-failure-callback":                                           failureURL,
		"upstash-failure-callback-forward-upstash-workflow-is-failure":       "true",
		"upstash-failure-callback-forward-upstash-workflow-failure-callback": "true",
		"upstash-failure-callback-workflow-runid":                            runID,
		"upstash-failure-callback-workflow-init":                             "false",
		"upstash-failure-callback-workflow-url":                              req.URL,
		"upstash-failure-callback-workflow-calltype":                         "failureCall",
		"upstash-failure-callback-feature-set":                               wire.FeatureSet,
	}
	// set puts a run setting on the trigger and mirrors it on the failure callback.
	set := func(name, value string) {
		h["upstash-"+name] = value
		h["upstash-failure-callback-"+name] = value
	}
	if req.Retries != nil && *req.Retries != defaultRunRetries {
		set("retries", strconv.Itoa(*req.Retries))
	}
	if req.RetryDelay != "" {
		set("retry-delay", req.RetryDelay)
	}
	if fc := req.FlowControl; fc != nil {
		if err := fc.validate(); err != nil {
			return batchEntry{}, "", err
		}
		set("flow-control-key", fc.Key)
		set("flow-control-value", fc.value())
	}
	// User headers (and the label, which the official SDK adds to them) are forwarded
	// on the trigger and on the failure callback.
	for name, values := range req.Headers {
		set("forward-"+strings.ToLower(name), strings.Join(values, ", "))
	}
	if len(req.Labels) > 0 {
		label := strings.Join(req.Labels, ",")
		for _, l := range req.Labels {
			if !validLabel(l) {
				return batchEntry{}, "", fmt.Errorf("sdk: Trigger: label %q: want [a-zA-Z0-9-_.]+", l)
			}
		}
		set("forward-upstash-label", label)
		h["upstash-label"] = label
	}
	contentType := req.ContentType
	if contentType == "" {
		contentType = req.Headers.Get("Content-Type")
	}
	if contentType == "" {
		contentType = "application/json"
	}
	h["content-type"] = contentType
	if req.Delay > 0 {
		h["upstash-delay"] = seconds(req.Delay)
	}
	if !req.NotBefore.IsZero() {
		h["upstash-not-before"] = strconv.FormatInt(req.NotBefore.Unix(), 10)
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

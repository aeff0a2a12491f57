package sdk

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duraton/duraton/sdk/wire"
)

// PublishRequest is one message to publish (docs/protocol.md, "Publishing a message"). Only
// URL is required.
type PublishRequest struct {
	// URL is the destination, an absolute http(s) URL. It goes raw into the request path
	// (/v2/publish/<url>), query string included, as the official SDKs send it.
	URL string
	// Body is delivered byte for byte. Batch needs it to be valid UTF-8.
	Body []byte
	// Method of the delivery. Default POST.
	Method string
	// Headers are delivered with the message: each is sent as Upstash-Forward-<Name>.
	// Names starting with "Upstash-" and Content-Type are sent as they are (not
	// forwarded), like the official SDK does, so publish headers can be given here too.
	Headers http.Header
	// ContentType of the body, delivered with it. Default: none.
	ContentType string
	// Delay before the first delivery, in whole seconds (rounded up).
	Delay time.Duration
	// NotBefore is the earliest delivery time (unix seconds on the wire). It wins over
	// Delay.
	NotBefore time.Time
	// Retries after the first attempt. Nil: the server's default (3).
	Retries *int
	// RetryDelay is an expression of the delay before a retry in milliseconds, with the
	// variable "retried", e.g. "1000 * (1 + retried)". Default: exponential backoff.
	RetryDelay string
	// Timeout of one delivery attempt, in whole seconds (rounded up). Default: the
	// server's.
	Timeout time.Duration
	// Callback receives the outcome of every attempt; FailureCallback the final failure.
	Callback, FailureCallback string
	// DeduplicationID drops another message with the same id within the dedup window.
	DeduplicationID string
	// ContentBasedDeduplication deduplicates on a hash of the destination and the body.
	ContentBasedDeduplication bool
	// Labels tag the message for filtering logs, the DLQ and cancel.
	Labels []string
	// FlowControl limits the deliveries of all messages sharing its key.
	FlowControl *FlowControl
	// Queue puts the message into this named queue (Upstash-Queue-Name; Batch: the entry's
	// queue). Enqueue sets it from its argument.
	Queue string
}

// FlowControl is a flow-control key and its limits (docs/protocol.md, "Flow control"). At
// least one of Parallelism and Rate must be positive.
type FlowControl struct {
	// Key groups the deliveries the limits apply to, across URLs and runs.
	Key string
	// Parallelism is the most deliveries of the key in flight at once (0: no limit).
	Parallelism int
	// Rate is the most deliveries of the key started per Period (0: no limit).
	Rate int
	// Period of Rate, in whole seconds (rounded up). Zero: the server's default (1s).
	Period time.Duration
}

// validate reports a key-less FlowControl or one without a positive limit.
func (fc *FlowControl) validate() error {
	if fc.Key == "" {
		return fmt.Errorf("sdk: flow control: key is required")
	}
	if fc.Parallelism <= 0 && fc.Rate <= 0 {
		return fmt.Errorf("sdk: flow control %q: give a positive parallelism or rate", fc.Key)
	}
	return nil
}

// value renders the Upstash-Flow-Control-Value header: "parallelism=N, rate=N, period=Ns",
// each item only when set, the period in whole seconds rounded up (docs/protocol.md, "Flow
// control"). Call validate first.
func (fc *FlowControl) value() string {
	v := wire.FlowControlValue{Parallelism: fc.Parallelism, Rate: fc.Rate}
	if fc.Period > 0 {
		v.Period = (fc.Period + time.Second - 1).Truncate(time.Second)
	}
	return v.String()
}

// PublishResult is the server's answer to one published message.
type PublishResult = wire.PublishResult

// Publish publishes one message (POST /v2/publish/<url>). The answer comes once the
// message is stored durably.
func (c *Client) Publish(ctx context.Context, req PublishRequest) (PublishResult, error) {
	return c.publishTo(ctx, "/v2/publish/", req)
}

// PublishJSON publishes v encoded as JSON with Content-Type application/json; req.Body and
// req.ContentType are replaced.
func (c *Client) PublishJSON(ctx context.Context, req PublishRequest, v any) (PublishResult, error) {
	body, err := wire.CompactJSON(v)
	if err != nil {
		return PublishResult{}, fmt.Errorf("sdk: PublishJSON: encode body: %w", err)
	}
	req.Body, req.ContentType = body, "application/json"
	return c.Publish(ctx, req)
}

// Enqueue publishes one message into the named queue (POST /v2/enqueue/<queue>/<url>). A
// queue the project does not have yet is created with parallelism 1.
func (c *Client) Enqueue(ctx context.Context, queue string, req PublishRequest) (PublishResult, error) {
	if queue == "" {
		return PublishResult{}, errEmpty("Enqueue", "queue")
	}
	req.Queue = ""
	return c.publishTo(ctx, "/v2/enqueue/"+seg(queue)+"/", req)
}

func (c *Client) publishTo(ctx context.Context, prefix string, req PublishRequest) (PublishResult, error) {
	if req.URL == "" {
		return PublishResult{}, errEmpty("Publish", "URL")
	}
	header, err := publishHeaders(&req)
	if err != nil {
		return PublishResult{}, err
	}
	body := req.Body
	if body == nil {
		body = []byte{}
	}
	var out PublishResult
	err = c.do(ctx, http.MethodPost, prefix+req.URL, nil, header, body, &out)
	return out, err
}

// batchEntry is one element of the POST /v2/batch body.
type batchEntry = wire.BatchEntry

// Batch publishes several messages atomically (POST /v2/batch): either all are stored or
// none is. The results are in the order of reqs. Bodies must be valid UTF-8 (the batch is
// JSON).
func (c *Client) Batch(ctx context.Context, reqs []PublishRequest) ([]PublishResult, error) {
	if len(reqs) == 0 {
		return nil, errEmpty("Batch", "at least one request")
	}
	entries := make([]batchEntry, len(reqs))
	for i := range reqs {
		req := &reqs[i]
		if req.URL == "" {
			return nil, fmt.Errorf("sdk: Batch: entry %d: URL is required", i)
		}
		if !utf8.Valid(req.Body) {
			return nil, fmt.Errorf("sdk: Batch: entry %d: body is not valid UTF-8", i)
		}
		header, err := publishHeaders(req)
		if err != nil {
			return nil, fmt.Errorf("sdk: Batch: entry %d: %w", i, err)
		}
		header.Del(wire.HeaderQueueName) // the entry's queue field says it
		entries[i] = batchEntry{Destination: req.URL, Headers: lowerHeaders(header), Body: string(req.Body), Queue: req.Queue}
	}
	return c.batch(ctx, entries)
}

func (c *Client) batch(ctx context.Context, entries []batchEntry) ([]PublishResult, error) {
	var out []PublishResult
	if err := c.doJSON(ctx, http.MethodPost, "/v2/batch", nil, entries, &out); err != nil {
		return nil, err
	}
	if len(out) != len(entries) {
		return out, fmt.Errorf("sdk: batch: %d answers for %d messages", len(out), len(entries))
	}
	return out, nil
}

// publishHeaders renders req as QStash publish headers (docs/protocol.md, "Publishing a message").
func publishHeaders(req *PublishRequest) (http.Header, error) {
	h := http.Header{}
	for name, values := range req.Headers {
		lower := strings.ToLower(name)
		if !strings.HasPrefix(lower, "upstash-") && lower != "content-type" {
			name = wire.PrefixForward + name
		}
		for _, v := range values {
			h.Add(name, v)
		}
	}
	method := req.Method
	if method == "" {
		method = wire.DefaultMethod
	}
	h.Set(wire.HeaderMethod, method)
	setIf(h, wire.HeaderContentType, req.ContentType)
	if req.Delay > 0 {
		h.Set(wire.HeaderDelay, seconds(req.Delay))
	}
	if !req.NotBefore.IsZero() {
		h.Set(wire.HeaderNotBefore, strconv.FormatInt(req.NotBefore.Unix(), 10))
	}
	if req.Retries != nil {
		h.Set(wire.HeaderRetries, strconv.Itoa(*req.Retries))
	}
	setIf(h, wire.HeaderRetryDelay, req.RetryDelay)
	if req.Timeout > 0 {
		h.Set(wire.HeaderTimeout, seconds(req.Timeout))
	}
	setIf(h, wire.HeaderCallback, req.Callback)
	setIf(h, wire.HeaderFailureCallback, req.FailureCallback)
	setIf(h, wire.HeaderDeduplicationID, req.DeduplicationID)
	if req.ContentBasedDeduplication {
		h.Set(wire.HeaderContentBasedDedup, "true")
	}
	setIf(h, wire.HeaderLabel, strings.Join(req.Labels, ","))
	if fc := req.FlowControl; fc != nil {
		if err := fc.validate(); err != nil {
			return nil, err
		}
		h.Set(wire.HeaderFlowControlKey, fc.Key)
		h.Set(wire.HeaderFlowControlValue, fc.value())
	}
	setIf(h, wire.HeaderQueueName, req.Queue)
	return h, nil
}

// lowerHeaders flattens h into the lower-case, one-value-per-name map of a batch entry;
// repeated values are joined with ", ".
func lowerHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for name, values := range h {
		out[strings.ToLower(name)] = strings.Join(values, ", ")
	}
	return out
}

func setIf(h http.Header, name, value string) {
	if value != "" {
		h.Set(name, value)
	}
}

// seconds renders d as whole seconds, rounded up: "30s".
func seconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10) + "s"
}

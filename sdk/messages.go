package sdk

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// The JSON types of messages, logs, dead letters and queues are the protocol's own
// (package wire); the SDK re-exports them.
type (
	// Message is a stored message as GET /v2/messages/{id} shows it.
	Message = wire.Message
	// Waiting says why a due delivery has not started yet (flow control) and since when.
	Waiting = wire.Waiting
)

// MessageFilter selects messages, log events or dead letters. Empty fields match
// everything.
type MessageFilter struct {
	URL            string // exact destination URL
	URLPrefix      string // destination URL prefix
	QueueName      string
	Label          string
	MessageID      string
	CallerIP       string
	Host           string // destination host (with port, if any)
	Path           string // destination path
	FlowControlKey string
	FromDate       time.Time // at or after
	ToDate         time.Time // at or before
}

func (f *MessageFilter) isZero() bool { return *f == MessageFilter{} }

func (f *MessageFilter) encode(q url.Values) {
	setQuery(q, "url", f.URL)
	setQuery(q, "urlPrefix", f.URLPrefix)
	setQuery(q, "queueName", f.QueueName)
	setQuery(q, "label", f.Label)
	setQuery(q, "messageId", f.MessageID)
	setQuery(q, "callerIp", f.CallerIP)
	setQuery(q, "host", f.Host)
	setQuery(q, "path", f.Path)
	setQuery(q, "flowControlKey", f.FlowControlKey)
	setTime(q, "fromDate", f.FromDate)
	setTime(q, "toDate", f.ToDate)
}

// Message reads a pending message (GET /v2/messages/{id}). An unknown id is a 404
// (IsNotFound).
func (c *Client) Message(ctx context.Context, id string) (Message, error) {
	if id == "" {
		return Message{}, errEmpty("Message", "id")
	}
	var out Message
	err := c.do(ctx, http.MethodGet, "/v2/messages/"+seg(id), nil, nil, nil, &out)
	return out, err
}

// CancelMessage cancels one pending message (DELETE /v2/messages/{id}).
func (c *Client) CancelMessage(ctx context.Context, id string) error {
	if id == "" {
		return errEmpty("CancelMessage", "id")
	}
	return c.do(ctx, http.MethodDelete, "/v2/messages/"+seg(id), nil, nil, nil, nil)
}

// CancelMessagesRequest selects the pending messages CancelMessages cancels: MessageIDs,
// or the messages matching Filter, or, with All, every pending message.
type CancelMessagesRequest struct {
	MessageIDs []string
	Filter     MessageFilter
	// All must be set to cancel every pending message with neither ids nor filter.
	All bool
}

// CancelMessages cancels pending messages by id or by filter (DELETE /v2/messages) and
// returns how many were cancelled.
func (c *Client) CancelMessages(ctx context.Context, req CancelMessagesRequest) (int, error) {
	if len(req.MessageIDs) == 0 && req.Filter.isZero() && !req.All {
		return 0, errNoSelection("CancelMessages")
	}
	q := url.Values{}
	addQuery(q, "messageIds", req.MessageIDs)
	req.Filter.encode(q)
	var out wire.CancelResult
	err := c.do(ctx, http.MethodDelete, "/v2/messages", q, nil, nil, &out)
	return out.Cancelled, err
}

func setQuery(q url.Values, key, value string) {
	if value != "" {
		q.Set(key, value)
	}
}

// setTime sets a unix-millisecond parameter when t is set.
func setTime(q url.Values, key string, t time.Time) {
	if !t.IsZero() {
		q.Set(key, strconv.FormatInt(t.UnixMilli(), 10))
	}
}

func setInt(q url.Values, key string, n int) {
	if n != 0 {
		q.Set(key, strconv.Itoa(n))
	}
}

// addQuery adds a repeated parameter: key=a&key=b (docs/protocol.md, "Where QStash's behaviour
// is not obvious").
func addQuery(q url.Values, key string, values []string) {
	for _, v := range values {
		q.Add(key, v)
	}
}

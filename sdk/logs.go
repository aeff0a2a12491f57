package sdk

import (
	"context"
	"net/http"
	"net/url"

	"github.com/duraton/duraton/sdk/wire"
)

// Log is one log event of a message (created, delivered, retried, failed, ...).
type Log = wire.Log

// LogsRequest selects one page of log events.
type LogsRequest struct {
	MessageIDs []string
	Filter     MessageFilter
	// State keeps events in this state: CREATED, ACTIVE, RETRY, DELIVERED, ERROR, FAILED
	// or CANCELLED.
	State string
	// Cursor is the Cursor of a previous page.
	Cursor string
	// Count is the page size (server default 100, at most 1,000).
	Count int
}

// LogsPage is one page of log events, newest first. Cursor is empty on the last page.
type LogsPage = wire.LogsPage

// Logs lists one page of log events (GET /v2/events, the SDK's name for /v2/logs).
func (c *Client) Logs(ctx context.Context, req LogsRequest) (LogsPage, error) {
	q := url.Values{}
	addQuery(q, "messageIds", req.MessageIDs)
	req.Filter.encode(q)
	setQuery(q, "state", req.State)
	setQuery(q, "cursor", req.Cursor)
	setInt(q, "count", req.Count)
	var out LogsPage
	err := c.do(ctx, http.MethodGet, "/v2/events", q, nil, nil, &out)
	return out, err
}

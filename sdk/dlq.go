package sdk

import (
	"context"
	"net/http"
	"net/url"

	"github.com/duraton/duraton/sdk/wire"
)

// DLQMessage is a dead letter: the message plus its last answer.
type DLQMessage = wire.DLQMessage

// DLQRequest selects one page of dead letters.
type DLQRequest struct {
	DLQIDs []string
	Filter MessageFilter
	// ResponseStatus keeps dead letters whose last answer had this status.
	ResponseStatus int
	// Cursor is the Cursor of a previous page.
	Cursor string
	// Count is the page size (server default 100, at most 1,000).
	Count int
}

func (r *DLQRequest) query() url.Values {
	q := url.Values{}
	addQuery(q, "dlqIds", r.DLQIDs)
	r.Filter.encode(q)
	setInt(q, "responseStatus", r.ResponseStatus)
	setQuery(q, "cursor", r.Cursor)
	setInt(q, "count", r.Count)
	return q
}

// DLQPage is one page of dead letters, newest first. Cursor is empty on the last page.
type DLQPage = wire.DLQPage

// DLQ lists one page of dead letters (GET /v2/dlq).
func (c *Client) DLQ(ctx context.Context, req DLQRequest) (DLQPage, error) {
	var out DLQPage
	err := c.do(ctx, http.MethodGet, "/v2/dlq", req.query(), nil, nil, &out)
	return out, err
}

// DeleteDLQ deletes the given dead letters (DELETE /v2/dlq?dlqIds=...) and returns how
// many were deleted. Unknown ids are skipped.
func (c *Client) DeleteDLQ(ctx context.Context, dlqIDs ...string) (int, error) {
	if len(dlqIDs) == 0 {
		return 0, errEmpty("DeleteDLQ", "a dlq id")
	}
	q := url.Values{}
	addQuery(q, "dlqIds", dlqIDs)
	var out wire.DeleteResult
	err := c.do(ctx, http.MethodDelete, "/v2/dlq", q, nil, nil, &out)
	return out.Deleted, err
}

// RetryDLQ publishes the given dead letters again with a fresh retry budget, removing them
// from the DLQ (POST /v2/dlq/retry), and returns the new messages. Unknown ids are
// skipped.
func (c *Client) RetryDLQ(ctx context.Context, dlqIDs ...string) ([]PublishResult, error) {
	if len(dlqIDs) == 0 {
		return nil, errEmpty("RetryDLQ", "a dlq id")
	}
	q := url.Values{}
	addQuery(q, "dlqIds", dlqIDs)
	var out wire.RetryResult
	err := c.do(ctx, http.MethodPost, "/v2/dlq/retry", q, nil, nil, &out)
	return out.Responses, err
}

package sdk

import (
	"context"
	"net/http"

	"github.com/duraton/duraton/sdk/wire"
)

// Waiter is a run waiting for an event (Context.WaitForEvent).
type Waiter = wire.Waiter

// NotifyResult is one run resumed by a notify, or (NotifyRun, lookback) the run the
// event was kept for, with an empty MessageID.
type NotifyResult = wire.NotifyResult

// Notify delivers data to every run waiting for eventID (POST /v2/notify/{eventId}) and
// returns one result per run resumed; none when nobody waits (the event is not kept).
func (c *Client) Notify(ctx context.Context, eventID string, data []byte) ([]NotifyResult, error) {
	if eventID == "" {
		return nil, errEmpty("Notify", "event id")
	}
	var out []NotifyResult
	err := c.do(ctx, http.MethodPost, "/v2/notify/"+seg(eventID), nil, nil, nonNil(data), &out)
	return out, err
}

// NotifyRun delivers data to one run (POST /v2/notify/{runId}/{eventId}). If the run does
// not wait for eventID yet, the event is kept and resolves its next wait for it at once
// (lookback). An unknown run is a 404.
func (c *Client) NotifyRun(ctx context.Context, runID, eventID string, data []byte) (NotifyResult, error) {
	if runID == "" || eventID == "" {
		return NotifyResult{}, errEmpty("NotifyRun", "run id and event id")
	}
	var out NotifyResult
	err := c.do(ctx, http.MethodPost, "/v2/notify/"+seg(runID)+"/"+seg(eventID), nil, nil, nonNil(data), &out)
	return out, err
}

// Waiters lists the runs waiting for eventID (GET /v2/waiters/{eventId}).
func (c *Client) Waiters(ctx context.Context, eventID string) ([]Waiter, error) {
	if eventID == "" {
		return nil, errEmpty("Waiters", "event id")
	}
	var out []Waiter
	err := c.do(ctx, http.MethodGet, "/v2/waiters/"+seg(eventID), nil, nil, nil, &out)
	return out, err
}

// nonNil makes an absent body an empty one, so the request always has a body.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

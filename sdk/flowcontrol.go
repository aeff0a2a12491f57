package sdk

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// FlowControlInfo is the state of one flow-control key (GET /v2/flowControl/{key}).
type FlowControlInfo = wire.FlowControlInfo

// GlobalParallelism is the project's ceiling on deliveries in flight (0: none) and the
// deliveries in flight now.
type GlobalParallelism = wire.GlobalParallelism

// FlowControlInfo reads one key's state. A key the server holds no state for reads as
// idle, never 404.
func (c *Client) FlowControlInfo(ctx context.Context, key string) (FlowControlInfo, error) {
	if key == "" {
		return FlowControlInfo{}, errEmpty("FlowControlInfo", "key")
	}
	var out FlowControlInfo
	err := c.do(ctx, http.MethodGet, "/v2/flowControl/"+seg(key), nil, nil, nil, &out)
	return out, err
}

// FlowControlKeys lists the project's active or configured keys whose name contains
// search (all of them when search is empty), sorted by key.
func (c *Client) FlowControlKeys(ctx context.Context, search string) ([]FlowControlInfo, error) {
	q := url.Values{}
	setQuery(q, "search", search)
	var out []FlowControlInfo
	err := c.do(ctx, http.MethodGet, "/v2/flowControl", q, nil, nil, &out)
	return out, err
}

// PauseFlowControl pauses a key: none of its deliveries starts until ResumeFlowControl.
// Publishing keeps working; deliveries join the key's waitlist.
func (c *Client) PauseFlowControl(ctx context.Context, key string) error {
	return c.flowCall(ctx, "PauseFlowControl", key, "/pause", nil)
}

// ResumeFlowControl resumes a paused key.
func (c *Client) ResumeFlowControl(ctx context.Context, key string) error {
	return c.flowCall(ctx, "ResumeFlowControl", key, "/resume", nil)
}

// PinFlowControl fixes a key's parallelism and/or rate per period, whatever its
// deliveries ask, until UnpinFlowControl. A zero value leaves that part as it is; period
// (whole seconds, rounded up) goes with rate, zero meaning 1s.
func (c *Client) PinFlowControl(ctx context.Context, key string, parallelism, rate int, period time.Duration) error {
	q := url.Values{}
	setInt(q, "parallelism", parallelism)
	setInt(q, "rate", rate)
	if period > 0 {
		q.Set("period", strconv.FormatInt(int64((period+time.Second-1)/time.Second), 10))
	}
	return c.flowCall(ctx, "PinFlowControl", key, "/pin", q)
}

// UnpinFlowControl removes the parallelism and/or the rate pin of a key.
func (c *Client) UnpinFlowControl(ctx context.Context, key string, parallelism, rate bool) error {
	q := url.Values{
		"parallelism": {strconv.FormatBool(parallelism)},
		"rate":        {strconv.FormatBool(rate)},
	}
	return c.flowCall(ctx, "UnpinFlowControl", key, "/unpin", q)
}

// ResetFlowControlRate forgets a key's recent starts, so its rate window starts afresh.
func (c *Client) ResetFlowControlRate(ctx context.Context, key string) error {
	return c.flowCall(ctx, "ResetFlowControlRate", key, "/resetRate", nil)
}

// GlobalParallelism reads the project's delivery ceiling and deliveries in flight.
func (c *Client) GlobalParallelism(ctx context.Context) (GlobalParallelism, error) {
	var out GlobalParallelism
	err := c.do(ctx, http.MethodGet, "/v2/globalParallelism", nil, nil, nil, &out)
	return out, err
}

func (c *Client) flowCall(ctx context.Context, call, key, suffix string, q url.Values) error {
	if key == "" {
		return errEmpty(call, "key")
	}
	return c.do(ctx, http.MethodPost, "/v2/flowControl/"+seg(key)+suffix, q, nil, nil, nil)
}

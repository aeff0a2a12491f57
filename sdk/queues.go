package sdk

import (
	"context"
	"net/http"

	"github.com/duraton/duraton/sdk/wire"
)

// Queue is a named queue: its messages are delivered in order, at most Parallelism at
// once.
type Queue = wire.Queue

// QueueConfig creates or updates a queue.
type QueueConfig struct {
	Name string `json:"queueName"`
	// Parallelism is the most deliveries in flight at once. Zero: the server's default (1).
	Parallelism int  `json:"parallelism,omitempty"`
	Paused      bool `json:"paused"`
}

// UpsertQueue creates or updates a queue (POST /v2/queues).
func (c *Client) UpsertQueue(ctx context.Context, cfg QueueConfig) error {
	if cfg.Name == "" {
		return errEmpty("UpsertQueue", "name")
	}
	return c.doJSON(ctx, http.MethodPost, "/v2/queues", nil, cfg, nil)
}

// Queue reads a queue (GET /v2/queues/{name}); an unknown queue is a 404.
func (c *Client) Queue(ctx context.Context, name string) (Queue, error) {
	if name == "" {
		return Queue{}, errEmpty("Queue", "name")
	}
	var out Queue
	err := c.do(ctx, http.MethodGet, "/v2/queues/"+seg(name), nil, nil, nil, &out)
	return out, err
}

// Queues lists the project's queues (GET /v2/queues).
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	var out []Queue
	err := c.do(ctx, http.MethodGet, "/v2/queues", nil, nil, nil, &out)
	return out, err
}

// DeleteQueue deletes a queue; its pending messages are delivered without its limits.
func (c *Client) DeleteQueue(ctx context.Context, name string) error {
	return c.queueCall(ctx, "DeleteQueue", http.MethodDelete, name, "")
}

// PauseQueue pauses a queue: its messages wait until ResumeQueue.
func (c *Client) PauseQueue(ctx context.Context, name string) error {
	return c.queueCall(ctx, "PauseQueue", http.MethodPost, name, "/pause")
}

// ResumeQueue resumes a paused queue.
func (c *Client) ResumeQueue(ctx context.Context, name string) error {
	return c.queueCall(ctx, "ResumeQueue", http.MethodPost, name, "/resume")
}

func (c *Client) queueCall(ctx context.Context, call, method, name, suffix string) error {
	if name == "" {
		return errEmpty(call, "name")
	}
	return c.do(ctx, method, "/v2/queues/"+seg(name)+suffix, nil, nil, nil, nil)
}

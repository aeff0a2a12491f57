package sdk

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClientRoutes checks the method, path and query of every management call against
// openapi.yaml, repeated ids included (?dlqIds=a&dlqIds=b, docs/protocol.md, "Where QStash's
// behaviour is not obvious").
func TestClientRoutes(t *testing.T) {
	t.Parallel()
	from := time.UnixMilli(1700000000000)

	tests := []struct {
		name   string
		answer string
		call   func(context.Context, *Client) error
		method string
		uri    string
		body   string
	}{
		{"Message", `{}`, func(ctx context.Context, c *Client) error { _, err := c.Message(ctx, "msg_1"); return err },
			http.MethodGet, "/v2/messages/msg_1", ""},
		{"CancelMessage", `{"cancelled":1}`, func(ctx context.Context, c *Client) error { return c.CancelMessage(ctx, "msg_1") },
			http.MethodDelete, "/v2/messages/msg_1", ""},
		{"CancelMessagesByID", `{"cancelled":2}`, func(ctx context.Context, c *Client) error {
			n, err := c.CancelMessages(ctx, CancelMessagesRequest{MessageIDs: []string{"msg_a", "msg_b"}})
			if err == nil && n != 2 {
				t.Errorf("cancelled %d, want 2", n)
			}
			return err
		}, http.MethodDelete, "/v2/messages?messageIds=msg_a&messageIds=msg_b", ""},
		{"CancelMessagesByFilter", `{"cancelled":0}`, func(ctx context.Context, c *Client) error {
			_, err := c.CancelMessages(ctx, CancelMessagesRequest{Filter: MessageFilter{URLPrefix: "http://x/", Label: "l", FromDate: from}})
			return err
		}, http.MethodDelete, "/v2/messages?fromDate=1700000000000&label=l&urlPrefix=http%3A%2F%2Fx%2F", ""},
		{"CancelAllMessages", `{"cancelled":0}`, func(ctx context.Context, c *Client) error {
			_, err := c.CancelMessages(ctx, CancelMessagesRequest{All: true})
			return err
		}, http.MethodDelete, "/v2/messages", ""},
		{"DLQ", `{"messages":[]}`, func(ctx context.Context, c *Client) error {
			_, err := c.DLQ(ctx, DLQRequest{Filter: MessageFilter{QueueName: "q"}, ResponseStatus: 500, Cursor: "c", Count: 10})
			return err
		}, http.MethodGet, "/v2/dlq?count=10&cursor=c&queueName=q&responseStatus=500", ""},
		{"DeleteDLQ", `{"deleted":2}`, func(ctx context.Context, c *Client) error { _, err := c.DeleteDLQ(ctx, "dlq_a", "dlq_b"); return err },
			http.MethodDelete, "/v2/dlq?dlqIds=dlq_a&dlqIds=dlq_b", ""},
		{"RetryDLQ", `{"responses":[{"messageId":"msg_n"}]}`, func(ctx context.Context, c *Client) error { _, err := c.RetryDLQ(ctx, "dlq_a"); return err },
			http.MethodPost, "/v2/dlq/retry?dlqIds=dlq_a", ""},
		{"Logs", `{"events":[]}`, func(ctx context.Context, c *Client) error {
			_, err := c.Logs(ctx, LogsRequest{MessageIDs: []string{"m1", "m2"}, State: "DELIVERED", Count: 5})
			return err
		}, http.MethodGet, "/v2/events?count=5&messageIds=m1&messageIds=m2&state=DELIVERED", ""},
		{"UpsertQueue", ``, func(ctx context.Context, c *Client) error {
			return c.UpsertQueue(ctx, QueueConfig{Name: "orders", Parallelism: 2})
		}, http.MethodPost, "/v2/queues", `{"queueName":"orders","parallelism":2,"paused":false}`},
		{"Queue", `{"name":"orders"}`, func(ctx context.Context, c *Client) error { _, err := c.Queue(ctx, "orders"); return err },
			http.MethodGet, "/v2/queues/orders", ""},
		{"Queues", `[]`, func(ctx context.Context, c *Client) error { _, err := c.Queues(ctx); return err },
			http.MethodGet, "/v2/queues", ""},
		{"DeleteQueue", ``, func(ctx context.Context, c *Client) error { return c.DeleteQueue(ctx, "orders") },
			http.MethodDelete, "/v2/queues/orders", ""},
		{"PauseQueue", ``, func(ctx context.Context, c *Client) error { return c.PauseQueue(ctx, "orders") },
			http.MethodPost, "/v2/queues/orders/pause", ""},
		{"ResumeQueue", ``, func(ctx context.Context, c *Client) error { return c.ResumeQueue(ctx, "orders") },
			http.MethodPost, "/v2/queues/orders/resume", ""},
		{"FlowControlInfo", `{"flowControlKey":"k"}`, func(ctx context.Context, c *Client) error { _, err := c.FlowControlInfo(ctx, "k"); return err },
			http.MethodGet, "/v2/flowControl/k", ""},
		{"FlowControlKeys", `[]`, func(ctx context.Context, c *Client) error { _, err := c.FlowControlKeys(ctx, "ven"); return err },
			http.MethodGet, "/v2/flowControl?search=ven", ""},
		{"PauseFlowControl", ``, func(ctx context.Context, c *Client) error { return c.PauseFlowControl(ctx, "k") },
			http.MethodPost, "/v2/flowControl/k/pause", ""},
		{"ResumeFlowControl", ``, func(ctx context.Context, c *Client) error { return c.ResumeFlowControl(ctx, "k") },
			http.MethodPost, "/v2/flowControl/k/resume", ""},
		{"PinFlowControl", ``, func(ctx context.Context, c *Client) error { return c.PinFlowControl(ctx, "k", 3, 10, time.Minute) },
			http.MethodPost, "/v2/flowControl/k/pin?parallelism=3&period=60&rate=10", ""},
		{"PinFlowControlParallelismOnly", ``, func(ctx context.Context, c *Client) error { return c.PinFlowControl(ctx, "k", 3, 0, 0) },
			http.MethodPost, "/v2/flowControl/k/pin?parallelism=3", ""},
		{"UnpinFlowControl", ``, func(ctx context.Context, c *Client) error { return c.UnpinFlowControl(ctx, "k", true, false) },
			http.MethodPost, "/v2/flowControl/k/unpin?parallelism=true&rate=false", ""},
		{"ResetFlowControlRate", ``, func(ctx context.Context, c *Client) error { return c.ResetFlowControlRate(ctx, "k") },
			http.MethodPost, "/v2/flowControl/k/resetRate", ""},
		{"GlobalParallelism", `{"parallelismMax":4,"parallelismCount":1}`, func(ctx context.Context, c *Client) error {
			g, err := c.GlobalParallelism(ctx)
			if err == nil && (g.Max != 4 || g.Count != 1) {
				t.Errorf("global parallelism %+v", g)
			}
			return err
		}, http.MethodGet, "/v2/globalParallelism", ""},
		{"Notify", `[]`, func(ctx context.Context, c *Client) error {
			_, err := c.Notify(ctx, "evt 1", []byte(`{"a":1}`))
			return err
		},
			http.MethodPost, "/v2/notify/evt%201", `{"a":1}`},
		{"NotifyRun", `{"waiter":{},"messageId":"","error":""}`, func(ctx context.Context, c *Client) error {
			_, err := c.NotifyRun(ctx, "wfr_1", "evt", []byte("hi"))
			return err
		}, http.MethodPost, "/v2/notify/wfr_1/evt", "hi"},
		{"Waiters", `[]`, func(ctx context.Context, c *Client) error { _, err := c.Waiters(ctx, "evt"); return err },
			http.MethodGet, "/v2/waiters/evt", ""},
		{"CancelRunsByID", `{"cancelled":2}`, func(ctx context.Context, c *Client) error {
			_, err := c.Cancel(ctx, CancelRequest{RunIDs: []string{"wfr_a", "wfr_b"}})
			return err
		}, http.MethodDelete, "/v2/workflows/runs?workflowRunIds=wfr_a&workflowRunIds=wfr_b", ""},
		{"CancelRunsByURLPrefix", `{"cancelled":0}`, func(ctx context.Context, c *Client) error {
			_, err := c.Cancel(ctx, CancelRequest{URLPrefix: "http://wf/", Label: "x", Count: 7})
			return err
		}, http.MethodDelete, "/v2/workflows/runs?count=7&label=x&workflowUrl=http%3A%2F%2Fwf%2F", ""},
		{"CancelAllRuns", `{"cancelled":0}`, func(ctx context.Context, c *Client) error {
			_, err := c.Cancel(ctx, CancelRequest{All: true})
			return err
		}, http.MethodDelete, "/v2/workflows/runs", ""},
		{"RunLogs", `{"runs":[]}`, func(ctx context.Context, c *Client) error {
			_, err := c.RunLogs(ctx, RunLogsRequest{RunID: "wfr_1", State: RunFailed, URL: "http://wf/a", Cursor: "cur", Count: 3})
			return err
		}, http.MethodGet, "/v2/workflows/events?count=3&cursor=cur&groupBy=workflowRunId&state=RUN_FAILED&workflowRunId=wfr_1&workflowUrl=http%3A%2F%2Fwf%2Fa&workflowUrlExactMatch=true", ""},
		{"WorkflowDLQ", `{"messages":[]}`, func(ctx context.Context, c *Client) error {
			_, err := c.WorkflowDLQ(ctx, WorkflowDLQRequest{RunID: "wfr_1", URLPrefix: "http://wf/"})
			return err
		}, http.MethodGet, "/v2/workflows/dlq?workflowRunId=wfr_1&workflowUrl=http%3A%2F%2Fwf%2F", ""},
		{"ResumeRuns", `{"workflowRuns":[]}`, func(ctx context.Context, c *Client) error { _, err := c.ResumeRuns(ctx, "dlq_a", "dlq_b"); return err },
			http.MethodPost, "/v2/workflows/dlq/resume?dlqIds=dlq_a&dlqIds=dlq_b", ""},
		{"RestartRuns", `{"workflowRuns":[]}`, func(ctx context.Context, c *Client) error { _, err := c.RestartRuns(ctx, "dlq_a"); return err },
			http.MethodPost, "/v2/workflows/dlq/restart?dlqIds=dlq_a", ""},
		{"DeleteWorkflowDLQ", `{"deleted":1}`, func(ctx context.Context, c *Client) error { _, err := c.DeleteWorkflowDLQ(ctx, "dlq_a"); return err },
			http.MethodDelete, "/v2/workflows/dlq?dlqIds=dlq_a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, fake := newClientWithFake(t, http.StatusOK, tt.answer)
			require.NoError(t, tt.call(context.Background(), c))
			got := fake.last(t)
			require.Equal(t, tt.method, got.Method)
			require.Equal(t, tt.uri, got.RequestURI)
			require.Equal(t, tt.body, string(got.Body))
			require.Equal(t, "Bearer tok", got.Header.Get("Authorization"))
		})
	}
}

package sdk

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPublish(t *testing.T) {
	t.Parallel()

	t.Run("AllHeaders", func(t *testing.T) {
		t.Parallel()
		c, fake := newClientWithFake(t, http.StatusCreated, `{"messageId":"msg_1","url":"https://example.com/a//b?x=1"}`)
		retries := 0
		res, err := c.Publish(context.Background(), PublishRequest{
			URL:                       "https://example.com/a//b?x=1",
			Body:                      []byte("hello"),
			Method:                    http.MethodPut,
			Headers:                   http.Header{"X-Tenant": {"t1"}, "Upstash-Redact-Fields": {"body"}},
			ContentType:               "text/plain",
			Delay:                     1500 * time.Millisecond,
			NotBefore:                 time.Unix(1700000000, 0),
			Retries:                   &retries,
			RetryDelay:                "1000 * (1 + retried)",
			Timeout:                   30 * time.Second,
			Callback:                  "https://cb.example/ok",
			FailureCallback:           "https://cb.example/fail",
			DeduplicationID:           "dedup-1",
			ContentBasedDeduplication: true,
			Labels:                    []string{"a", "b"},
			FlowControl:               &FlowControl{Key: "vendor", Parallelism: 2, Rate: 10, Period: time.Minute},
			Queue:                     "orders",
		})
		require.NoError(t, err)
		require.Equal(t, PublishResult{MessageID: "msg_1", URL: "https://example.com/a//b?x=1"}, res)

		got := fake.last(t)
		require.Equal(t, http.MethodPost, got.Method)
		require.Equal(t, "/v2/publish/https://example.com/a//b?x=1", got.RequestURI, "the destination goes raw into the path")
		require.Equal(t, "hello", string(got.Body))
		want := map[string]string{
			"Upstash-Forward-X-Tenant":            "t1",
			"Upstash-Redact-Fields":               "body",
			"Upstash-Method":                      "PUT",
			"Content-Type":                        "text/plain",
			"Upstash-Delay":                       "2s",
			"Upstash-Not-Before":                  "1700000000",
			"Upstash-Retries":                     "0",
			"Upstash-Retry-Delay":                 "1000 * (1 + retried)",
			"Upstash-Timeout":                     "30s",
			"Upstash-Callback":                    "https://cb.example/ok",
			"Upstash-Failure-Callback":            "https://cb.example/fail",
			"Upstash-Deduplication-Id":            "dedup-1",
			"Upstash-Content-Based-Deduplication": "true",
			"Upstash-Label":                       "a,b",
			"Upstash-Flow-Control-Key":            "vendor",
			"Upstash-Flow-Control-Value":          "parallelism=2, rate=10, period=60s",
			"Upstash-Queue-Name":                  "orders",
			"Authorization":                       "Bearer tok",
		}
		for name, value := range want {
			require.Equal(t, value, got.Header.Get(name), name)
		}
		require.Empty(t, got.Header.Get("X-Tenant"), "user headers are forwarded, not sent")
	})

	t.Run("Minimal", func(t *testing.T) {
		t.Parallel()
		c, fake := newClientWithFake(t, http.StatusCreated, `{"messageId":"msg_1"}`)
		_, err := c.Publish(context.Background(), PublishRequest{URL: "http://127.0.0.1:9/hook"})
		require.NoError(t, err)
		got := fake.last(t)
		require.Equal(t, "/v2/publish/http://127.0.0.1:9/hook", got.RequestURI)
		require.Equal(t, "POST", got.Header.Get("Upstash-Method"))
		for _, name := range []string{"Upstash-Retries", "Upstash-Delay", "Upstash-Flow-Control-Key", "Upstash-Label", "Upstash-Queue-Name"} {
			require.Empty(t, got.Header.Values(name), name)
		}
	})

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		c, fake := newClientWithFake(t, http.StatusCreated, `{"messageId":"msg_1"}`)
		_, err := c.PublishJSON(context.Background(), PublishRequest{URL: "http://x/y"}, map[string]string{"html": "<b>"})
		require.NoError(t, err)
		got := fake.last(t)
		require.Equal(t, `{"html":"<b>"}`, string(got.Body), "compact, no HTML escaping, like JSON.stringify")
		require.Equal(t, "application/json", got.Header.Get("Content-Type"))
	})

	t.Run("Enqueue", func(t *testing.T) {
		t.Parallel()
		c, fake := newClientWithFake(t, http.StatusCreated, `{"messageId":"msg_1"}`)
		_, err := c.Enqueue(context.Background(), "orders", PublishRequest{URL: "http://x/y?z=1", Queue: "ignored"})
		require.NoError(t, err)
		got := fake.last(t)
		require.Equal(t, "/v2/enqueue/orders/http://x/y?z=1", got.RequestURI)
		require.Empty(t, got.Header.Get("Upstash-Queue-Name"))
	})
}

func TestBatch(t *testing.T) {
	t.Parallel()
	c, fake := newClientWithFake(t, http.StatusCreated, `[{"messageId":"msg_1"},{"messageId":"msg_2","deduplicated":true}]`)
	res, err := c.Batch(context.Background(), []PublishRequest{
		{URL: "http://a/1", Body: []byte("one"), Headers: http.Header{"X-A": {"1", "2"}}, Queue: "q"},
		{URL: "http://b/2", DeduplicationID: "d"},
	})
	require.NoError(t, err)
	require.Equal(t, []PublishResult{{MessageID: "msg_1"}, {MessageID: "msg_2", Deduplicated: true}}, res)

	got := fake.last(t)
	require.Equal(t, "/v2/batch", got.RequestURI)
	require.Equal(t, "application/json", got.Header.Get("Content-Type"))
	var entries []map[string]any
	require.NoError(t, json.Unmarshal(got.Body, &entries))
	require.Equal(t, []map[string]any{
		{
			"destination": "http://a/1", "body": "one", "queue": "q",
			"headers": map[string]any{"upstash-method": "POST", "upstash-forward-x-a": "1, 2"},
		},
		{
			"destination": "http://b/2",
			"headers":     map[string]any{"upstash-method": "POST", "upstash-deduplication-id": "d"},
		},
	}, entries)

	t.Run("RejectsBinaryBody", func(t *testing.T) {
		t.Parallel()
		c, _ := newClientWithFake(t, http.StatusCreated, `[]`)
		_, err := c.Batch(context.Background(), []PublishRequest{{URL: "http://a", Body: []byte{0xff}}})
		require.ErrorContains(t, err, "UTF-8")
	})

	t.Run("ShortAnswer", func(t *testing.T) {
		t.Parallel()
		c, _ := newClientWithFake(t, http.StatusCreated, `[]`)
		_, err := c.Batch(context.Background(), []PublishRequest{{URL: "http://a"}})
		require.ErrorContains(t, err, "0 answers for 1 messages")
	})
}

func TestFlowControlValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fc   FlowControl
		want string
	}{
		{FlowControl{Key: "k", Parallelism: 5}, "parallelism=5"},
		{FlowControl{Key: "k", Rate: 10}, "rate=10"},
		{FlowControl{Key: "k", Rate: 10, Period: 1500 * time.Millisecond}, "rate=10, period=2s"},
		{FlowControl{Key: "k", Parallelism: 1, Rate: 2, Period: time.Hour}, "parallelism=1, rate=2, period=3600s"},
	}
	for _, tt := range tests {
		require.NoError(t, tt.fc.validate())
		require.Equal(t, tt.want, tt.fc.value())
	}
	require.Error(t, (&FlowControl{Parallelism: 1}).validate())
	require.Error(t, (&FlowControl{Key: "k", Period: time.Second}).validate())
}

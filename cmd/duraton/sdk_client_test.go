package main

// The Go SDK's Client and Receiver against a real duraton process.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/sdk"
)

// sdkWait bounds every poll of this test.
const sdkWait = 15 * time.Second

// sdkDelivery is one request the test endpoint received on /ok.
type sdkDelivery struct {
	body      string
	header    http.Header
	verifyErr error
}

// sdkEndpoint is a local destination: /ok verifies the signature with sdk.Receiver and
// reports the delivery; /fail answers 500; /notwf answers 200 like a plain web app (not a
// workflow endpoint).
type sdkEndpoint struct {
	*httptest.Server
	deliveries chan sdkDelivery
	pending    []sdkDelivery // received while awaiting another body (test goroutine only)
}

func startSDKEndpoint(t *testing.T, receiver *sdk.Receiver) *sdkEndpoint {
	t.Helper()
	e := &sdkEndpoint{deliveries: make(chan sdkDelivery, 64)}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/ok":
			d := sdkDelivery{body: string(body), header: r.Header.Clone(),
				verifyErr: receiver.Verify(r.Header.Get("Upstash-Signature"), body, e.URL+r.RequestURI)}
			select {
			case e.deliveries <- d:
			default: // the test is not listening: drop
			}
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(e.Close)
	return e
}

// await returns the first /ok delivery whose body is body, failing after sdkWait.
// Deliveries arrive in any order: others are kept for a later await.
func (e *sdkEndpoint) await(t *testing.T, body string) sdkDelivery {
	t.Helper()
	if i := slices.IndexFunc(e.pending, func(d sdkDelivery) bool { return d.body == body }); i >= 0 {
		d := e.pending[i]
		e.pending = slices.Delete(e.pending, i, i+1)
		return d
	}
	deadline := time.After(sdkWait)
	for {
		select {
		case d := <-e.deliveries:
			if d.body == body {
				return d
			}
			e.pending = append(e.pending, d)
		case <-deadline:
			t.Fatalf("no delivery of %q within %v", body, sdkWait)
		}
	}
}

// eventually polls cond every 50ms until it holds or sdkWait passes. cond runs on another
// goroutine: it must not call require (t.FailNow), only report and return false.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deliverytest.Eventually(t, sdkWait, what, cond)
}

func TestSDKClientE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the duraton binary")
	}
	p := startDuraton(t, t.TempDir())
	client, err := sdk.NewClient(sdk.WithBaseURL(p.URL), sdk.WithToken(p.Token),
		sdk.WithHTTPClient(newAPIClient(t, 30*time.Second)), sdk.WithEnv(func(string) string { return "" }))
	require.NoError(t, err)
	receiver := &sdk.Receiver{CurrentSigningKey: p.CurrentSigningKey, NextSigningKey: p.NextSigningKey}
	ep := startSDKEndpoint(t, receiver)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zero := 0

	var publishedID string
	t.Run("PublishVerifiedByReceiver", func(t *testing.T) {
		res, err := client.Publish(ctx, sdk.PublishRequest{
			URL: ep.URL + "/ok?x=1", Body: []byte("publish-1"), ContentType: "text/plain",
			Headers: http.Header{"X-Tenant": {"t1"}},
		})
		require.NoError(t, err)
		require.NotEmpty(t, res.MessageID)
		publishedID = res.MessageID
		d := ep.await(t, "publish-1")
		require.NoError(t, d.verifyErr, "the Receiver accepts Duraton's signature, sub included")
		require.Equal(t, "t1", d.header.Get("X-Tenant"))
		require.Equal(t, "text/plain", d.header.Get("Content-Type"))
		require.Equal(t, res.MessageID, d.header.Get("Upstash-Message-Id"))
	})

	t.Run("Batch", func(t *testing.T) {
		res, err := client.Batch(ctx, []sdk.PublishRequest{
			{URL: ep.URL + "/ok", Body: []byte("batch-1")},
			{URL: ep.URL + "/ok", Body: []byte("batch-2"), DeduplicationID: "sdk-e2e-batch"},
		})
		require.NoError(t, err)
		require.Len(t, res, 2)
		require.NoError(t, ep.await(t, "batch-1").verifyErr)
		require.NoError(t, ep.await(t, "batch-2").verifyErr)
	})

	t.Run("Logs", func(t *testing.T) {
		eventually(t, "a DELIVERED log event of the first publish", func() bool {
			page, err := client.Logs(ctx, sdk.LogsRequest{MessageIDs: []string{publishedID}})
			if err != nil {
				t.Logf("poll: %v", err)
				return false
			}
			return slices.ContainsFunc(page.Events, func(l sdk.Log) bool { return l.State == "DELIVERED" })
		})
	})

	t.Run("MessagesGetAndCancel", func(t *testing.T) {
		later := sdk.PublishRequest{URL: ep.URL + "/ok", Body: []byte("never"), Delay: time.Hour, Labels: []string{"sdk-e2e"}}
		one, err := client.Publish(ctx, later)
		require.NoError(t, err)
		m, err := client.Message(ctx, one.MessageID)
		require.NoError(t, err)
		require.Equal(t, ep.URL+"/ok", m.URL)
		require.Equal(t, []string{"sdk-e2e"}, m.Labels)
		body, err := m.Bytes()
		require.NoError(t, err)
		require.Equal(t, "never", string(body))

		require.NoError(t, client.CancelMessage(ctx, one.MessageID))
		_, err = client.Message(ctx, one.MessageID)
		require.True(t, sdk.IsNotFound(err), "a cancelled message is gone: %v", err)
		require.True(t, sdk.IsNotFound(client.CancelMessage(ctx, one.MessageID)))

		a, err := client.Publish(ctx, later)
		require.NoError(t, err)
		b, err := client.Publish(ctx, later)
		require.NoError(t, err)
		n, err := client.CancelMessages(ctx, sdk.CancelMessagesRequest{MessageIDs: []string{a.MessageID, b.MessageID}})
		require.NoError(t, err)
		require.Equal(t, 2, n)
	})

	t.Run("DLQListRetryDelete", func(t *testing.T) {
		failURL := ep.URL + "/fail"
		_, err := client.Publish(ctx, sdk.PublishRequest{URL: failURL, Body: []byte("doomed"), Retries: &zero})
		require.NoError(t, err)
		var first sdk.DLQMessage
		eventually(t, "the failed message in the DLQ", func() bool {
			page, err := client.DLQ(ctx, sdk.DLQRequest{Filter: sdk.MessageFilter{URL: failURL}})
			if err != nil {
				t.Logf("poll: %v", err)
				return false
			}
			if len(page.Messages) == 0 {
				return false
			}
			first = page.Messages[0]
			return true
		})
		require.Equal(t, http.StatusInternalServerError, first.ResponseStatus)
		require.Equal(t, "doomed", first.Body)

		retried, err := client.RetryDLQ(ctx, first.DLQID)
		require.NoError(t, err)
		require.Len(t, retried, 1)
		var second sdk.DLQMessage
		eventually(t, "the retried message back in the DLQ", func() bool {
			page, err := client.DLQ(ctx, sdk.DLQRequest{Filter: sdk.MessageFilter{URL: failURL}})
			if err != nil {
				t.Logf("poll: %v", err)
				return false
			}
			if len(page.Messages) != 1 || page.Messages[0].DLQID == first.DLQID {
				return false
			}
			second = page.Messages[0]
			return true
		})
		require.Equal(t, retried[0].MessageID, second.MessageID)

		n, err := client.DeleteDLQ(ctx, second.DLQID)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		page, err := client.DLQ(ctx, sdk.DLQRequest{Filter: sdk.MessageFilter{URL: failURL}})
		require.NoError(t, err)
		require.Empty(t, page.Messages)
	})

	t.Run("Queues", func(t *testing.T) {
		const name = "sdk-e2e-queue"
		require.NoError(t, client.UpsertQueue(ctx, sdk.QueueConfig{Name: name, Parallelism: 2}))
		q, err := client.Queue(ctx, name)
		require.NoError(t, err)
		require.Equal(t, 2, q.Parallelism)
		require.False(t, q.Paused)
		all, err := client.Queues(ctx)
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(all, func(q sdk.Queue) bool { return q.Name == name }))

		require.NoError(t, client.PauseQueue(ctx, name))
		q, err = client.Queue(ctx, name)
		require.NoError(t, err)
		require.True(t, q.Paused)
		res, err := client.Enqueue(ctx, name, sdk.PublishRequest{URL: ep.URL + "/ok", Body: []byte("queued-1")})
		require.NoError(t, err)
		require.NotEmpty(t, res.MessageID)
		require.NoError(t, client.ResumeQueue(ctx, name))
		require.NoError(t, ep.await(t, "queued-1").verifyErr)

		require.NoError(t, client.DeleteQueue(ctx, name))
		_, err = client.Queue(ctx, name)
		require.True(t, sdk.IsNotFound(err), "deleted queue: %v", err)
	})

	t.Run("FlowControlPauseResume", func(t *testing.T) {
		const key = "sdk-e2e-key"
		require.NoError(t, client.PauseFlowControl(ctx, key))
		_, err := client.Publish(ctx, sdk.PublishRequest{URL: ep.URL + "/ok", Body: []byte("flow-1"),
			FlowControl: &sdk.FlowControl{Key: key, Parallelism: 1}})
		require.NoError(t, err)
		eventually(t, "the delivery waiting on the paused key", func() bool {
			info, err := client.FlowControlInfo(ctx, key)
			if err != nil {
				t.Logf("poll: %v", err)
				return false
			}
			return info.IsPaused && info.WaitListSize == 1
		})
		keys, err := client.FlowControlKeys(ctx, "sdk-e2e")
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(keys, func(i sdk.FlowControlInfo) bool { return i.Key == key }))

		require.NoError(t, client.ResumeFlowControl(ctx, key))
		require.NoError(t, ep.await(t, "flow-1").verifyErr)
		_, err = client.GlobalParallelism(ctx)
		require.NoError(t, err)
	})

	t.Run("TriggerNonWorkflowEndpointFails", func(t *testing.T) {
		res, err := client.Trigger(ctx, sdk.TriggerRequest{URL: ep.URL + "/notwf", BodyJSON: map[string]int{"n": 1}, Retries: &zero})
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(res.RunID, sdk.RunIDPrefix))
		require.False(t, res.Deduplicated)
		eventually(t, "the run RUN_FAILED (WF_DetectTrigger)", func() bool {
			page, err := client.RunLogs(ctx, sdk.RunLogsRequest{RunID: res.RunID})
			if err != nil {
				t.Logf("poll: %v", err)
				return false
			}
			return len(page.Runs) == 1 && page.Runs[0].State == sdk.RunFailed
		})
		dlq, err := client.WorkflowDLQ(ctx, sdk.WorkflowDLQRequest{RunID: res.RunID})
		require.NoError(t, err)
		require.Len(t, dlq.Messages, 1)
		require.Contains(t, dlq.Messages[0].Error, "non-workflow destination")
	})
}

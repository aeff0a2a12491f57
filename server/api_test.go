package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk/wire"
)

// verifySignature checks a delivery's Upstash-Signature with the given keys.
func verifySignature(q recorded, current, next string) error {
	return wire.Verifier{CurrentKey: current, NextKey: next}.Verify(q.Header.Get(wire.HeaderSignature), q.Body, q.URL, time.Now())
}

func TestAPIPublish(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})

	t.Run("delivered signed with forwarded headers", func(t *testing.T) {
		t.Parallel()
		dest := env.Endpoint.URL("/hook")
		body := []byte(`{"hello":"world"}`)
		r := env.call(t, http.MethodPost, "/v2/publish/"+dest, body,
			"Content-Type", "application/json",
			"Upstash-Forward-X-Custom", "v1",
			"upstash-forward-x-lower", "v2",
			"Upstash-Method", "PUT",
			"Upstash-Label", "a,b")
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		res := decodeJSON[wire.PublishResult](t, r)
		require.NotEmpty(t, res.MessageID)
		require.Equal(t, dest, res.URL)
		require.False(t, res.Deduplicated)

		got := env.Endpoint.waitMessage(t, res.MessageID)
		require.Equal(t, http.MethodPut, got.Method)
		require.Equal(t, dest, got.URL)
		require.Equal(t, body, got.Body)
		require.Equal(t, "v1", got.Header.Get("X-Custom"))
		require.Equal(t, "v2", got.Header.Get("X-Lower"))
		require.Equal(t, "application/json", got.Header.Get("Content-Type"))
		require.Equal(t, "0", got.Header.Get(wire.HeaderRetried))
		require.Equal(t, wire.UserAgent, got.Header.Get("User-Agent"))
		require.Empty(t, got.Header.Get("Authorization"), "the API token must never reach the destination")
		require.NoError(t, verifySignature(got, testCurrentKey, testNextKey))
		require.NoError(t, verifySignature(got, testCurrentKey, ""), "signed with the current key")
		require.Error(t, verifySignature(got, "sig_wrong", ""))

		// The log shows the message created then delivered, with its labels.
		eventually(t, "DELIVERED log", func() bool {
			return len(env.logs(t, "messageIds="+res.MessageID+"&state=DELIVERED").Events) == 1
		})
		ev := env.logs(t, "messageIds="+res.MessageID+"&state=CREATED").Events
		require.Len(t, ev, 1)
		require.Equal(t, []string{"a", "b"}, ev[0].Labels)
		require.Equal(t, "a", ev[0].Label, "the legacy label is the first")
		require.Equal(t, dest, ev[0].URL)
	})

	t.Run("destination query string and double slash kept", func(t *testing.T) {
		t.Parallel()
		dest := env.Endpoint.URL("/a//b/c?x=1&y=a%2Fb&x=2")
		id := env.publish(t, dest, nil)
		got := env.Endpoint.waitMessage(t, id)
		require.Equal(t, dest, got.URL)
		require.NoError(t, verifySignature(got, testCurrentKey, testNextKey))
	})

	t.Run("empty body and GET", func(t *testing.T) {
		t.Parallel()
		id := env.publish(t, env.Endpoint.URL("/get"), nil, "Upstash-Method", "get")
		got := env.Endpoint.waitMessage(t, id)
		require.Equal(t, http.MethodGet, got.Method)
		require.Empty(t, got.Body)
		require.NoError(t, verifySignature(got, testCurrentKey, testNextKey))
	})

	t.Run("deduplication id", func(t *testing.T) {
		t.Parallel()
		dest := env.Endpoint.URL("/dedup")
		first := decodeJSON[wire.PublishResult](t, env.call(t, http.MethodPost, "/v2/publish/"+dest, []byte("x"), "Upstash-Deduplication-Id", "d-1", "Upstash-Delay", "1h"))
		r := env.call(t, http.MethodPost, "/v2/publish/"+dest, []byte("x"), "Upstash-Deduplication-Id", "d-1", "Upstash-Delay", "1h")
		require.Equal(t, http.StatusCreated, r.Status)
		second := decodeJSON[wire.PublishResult](t, r)
		require.True(t, second.Deduplicated)
		require.Equal(t, first.MessageID, second.MessageID)
	})

	t.Run("content based deduplication", func(t *testing.T) {
		t.Parallel()
		dest := env.Endpoint.URL("/cbd")
		h := []string{"Upstash-Content-Based-Deduplication", "true", "Upstash-Delay", "1h"}
		a := decodeJSON[wire.PublishResult](t, env.call(t, http.MethodPost, "/v2/publish/"+dest, []byte("same"), h...))
		b := decodeJSON[wire.PublishResult](t, env.call(t, http.MethodPost, "/v2/publish/"+dest, []byte("same"), h...))
		c := decodeJSON[wire.PublishResult](t, env.call(t, http.MethodPost, "/v2/publish/"+dest, []byte("other"), h...))
		require.True(t, b.Deduplicated)
		require.Equal(t, a.MessageID, b.MessageID)
		require.False(t, c.Deduplicated)
		require.NotEqual(t, a.MessageID, c.MessageID)
	})

	t.Run("not before and options are stored", func(t *testing.T) {
		t.Parallel()
		notBefore := time.Now().Add(2 * time.Hour).Unix()
		dest := env.Endpoint.URL("/stored")
		id := env.publish(t, dest, []byte{0xff, 0x00},
			"Upstash-Not-Before", strconv.FormatInt(notBefore, 10),
			"Upstash-Delay", "5s", // Not-Before wins
			"Upstash-Retries", "7",
			"Upstash-Retry-Delay", "1000 * (1 + retried)",
			"Upstash-Timeout", "30",
			"Upstash-Callback", env.Endpoint.URL("/cb"),
			"Upstash-Failure-Callback", env.Endpoint.URL("/fcb"),
			"Upstash-Flow-Control-Key", "fc-1",
			"Upstash-Flow-Control-Value", "parallelism=2, rate=10, period=1m")
		r := env.call(t, http.MethodGet, "/v2/messages/"+id, nil)
		require.Equal(t, http.StatusOK, r.Status)
		m := decodeJSON[wire.Message](t, r)
		require.Equal(t, notBefore*1000, m.NotBefore)
		require.Equal(t, 7, m.MaxRetries)
		require.Equal(t, "1000 * (1 + retried)", m.RetryDelayExpression)
		require.EqualValues(t, 30, m.Timeout)
		require.Equal(t, env.Endpoint.URL("/cb"), m.Callback)
		require.Equal(t, env.Endpoint.URL("/fcb"), m.FailureCallback)
		require.Equal(t, "fc-1", m.FlowControlKey)
		require.Equal(t, 2, m.Parallelism)
		require.Equal(t, 10, m.Rate)
		require.EqualValues(t, 60, m.Period)
		require.Empty(t, m.Body)
		require.Equal(t, "/wA=", m.BodyBase64, "a non-UTF-8 body is shown in base64")
		require.Equal(t, "CREATED", m.State)
		require.Equal(t, "127.0.0.1", m.CallerIP)
	})
}

func TestAPIBatch(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	require.Equal(t, http.StatusOK, env.call(t, http.MethodPost, "/v2/queues", []byte(`{"queueName":"bq"}`), "Content-Type", "application/json").Status)

	dests := []string{env.Endpoint.URL("/batch/0"), env.Endpoint.URL("/batch/1?q=1"), env.Endpoint.URL("/batch/2"), env.Endpoint.URL("/batch/3")}
	entries := []map[string]any{
		{"destination": dests[0], "headers": map[string]string{"upstash-forward-x-idx": "0", "content-type": "text/plain"}, "body": "zero"},
		{"destination": dests[1], "headers": map[string]string{"upstash-method": "PATCH", "upstash-retries": "0"}},
		{"destination": dests[2], "headers": map[string]string{"upstash-delay": "1h", "upstash-label": "later"}, "body": "two"},
		{"destination": dests[3], "queue": "bq", "body": "three"},
	}
	raw, err := json.Marshal(entries)
	require.NoError(t, err)
	r := env.call(t, http.MethodPost, "/v2/batch", raw, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	answers := decodeJSON[[]wire.PublishResult](t, r)
	require.Len(t, answers, len(entries))
	for i, a := range answers {
		require.Equal(t, dests[i], a.URL, "answers are in request order")
		require.NotEmpty(t, a.MessageID)
	}

	got0 := env.Endpoint.waitMessage(t, answers[0].MessageID)
	require.Equal(t, "0", got0.Header.Get("X-Idx"), "lower-case forward header honoured")
	require.Equal(t, "text/plain", got0.Header.Get("Content-Type"))
	require.Equal(t, []byte("zero"), got0.Body)
	require.NoError(t, verifySignature(got0, testCurrentKey, testNextKey))

	got1 := env.Endpoint.waitMessage(t, answers[1].MessageID)
	require.Equal(t, http.MethodPatch, got1.Method, "lower-case upstash-method honoured")
	require.Equal(t, dests[1], got1.URL)
	require.Empty(t, got1.Body, "an entry without body has an empty body")

	got3 := env.Endpoint.waitMessage(t, answers[3].MessageID)
	require.Equal(t, []byte("three"), got3.Body)

	m := decodeJSON[wire.Message](t, env.call(t, http.MethodGet, "/v2/messages/"+answers[2].MessageID, nil))
	require.Greater(t, m.NotBefore, time.Now().Add(50*time.Minute).UnixMilli(), "lower-case upstash-delay honoured")
	require.Equal(t, []string{"later"}, m.Labels)
	require.Zero(t, env.Endpoint.deliveriesOf(answers[2].MessageID))

	lr := env.logs(t, "queueName=bq")
	require.NotEmpty(t, lr.Events)
	for _, ev := range lr.Events {
		require.Equal(t, answers[3].MessageID, ev.MessageID)
		require.Equal(t, "bq", ev.QueueName)
	}
}

func TestAPIQueues(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	jsonCT := []string{"Content-Type", "application/json"}

	r := env.call(t, http.MethodPost, "/v2/queues", []byte(`{"queueName":"orders","parallelism":2}`), jsonCT...)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Empty(t, r.Body)

	q := decodeJSON[wire.Queue](t, env.call(t, http.MethodGet, "/v2/queues/orders", nil))
	require.Equal(t, "orders", q.Name)
	require.Equal(t, 2, q.Parallelism)
	require.False(t, q.Paused)
	require.Zero(t, q.Lag)
	require.NotZero(t, q.CreatedAt)

	require.Equal(t, http.StatusOK, env.call(t, http.MethodPost, "/v2/queues", []byte(`{"queueName":"other"}`), jsonCT...).Status)
	list := decodeJSON[[]wire.Queue](t, env.call(t, http.MethodGet, "/v2/queues", nil))
	names := []string{}
	for _, q := range list {
		names = append(names, q.Name)
	}
	require.ElementsMatch(t, []string{"orders", "other"}, names)
	for _, q := range list {
		if q.Name == "other" {
			require.Equal(t, 1, q.Parallelism, "default parallelism")
		}
	}

	// Enqueue: delivered with the destination's query string kept.
	dest := env.Endpoint.URL("/q//x?k=v")
	r = env.call(t, http.MethodPost, "/v2/enqueue/orders/"+dest, []byte("e1"))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	id := decodeJSON[wire.PublishResult](t, r).MessageID
	got := env.Endpoint.waitMessage(t, id)
	require.Equal(t, dest, got.URL)
	require.NoError(t, verifySignature(got, testCurrentKey, testNextKey))
	require.Equal(t, "orders", env.logs(t, "messageIds="+id+"&state=CREATED").Events[0].QueueName)
	eventually(t, "the first message's queue slot released", func() bool {
		return decodeJSON[wire.Queue](t, env.call(t, http.MethodGet, "/v2/queues/orders", nil)).Lag == 0
	})

	// Pause: a message waits in the queue until resume.
	require.Equal(t, http.StatusOK, env.call(t, http.MethodPost, "/v2/queues/orders/pause", nil).Status)
	require.True(t, decodeJSON[wire.Queue](t, env.call(t, http.MethodGet, "/v2/queues/orders", nil)).Paused)
	id = decodeJSON[wire.PublishResult](t, env.call(t, http.MethodPost, "/v2/enqueue/orders/"+env.Endpoint.URL("/paused"), []byte("p"))).MessageID
	eventually(t, "the message parked in the paused queue", func() bool {
		return decodeJSON[wire.Queue](t, env.call(t, http.MethodGet, "/v2/queues/orders", nil)).Lag == 1
	})
	require.Zero(t, env.Endpoint.deliveriesOf(id), "a paused queue delivers nothing")
	require.Equal(t, http.StatusOK, env.call(t, http.MethodPost, "/v2/queues/orders/resume", nil).Status)
	require.False(t, decodeJSON[wire.Queue](t, env.call(t, http.MethodGet, "/v2/queues/orders", nil)).Paused)
	env.Endpoint.waitMessage(t, id)

	// Upsert keeps createdAt and changes settings.
	require.Equal(t, http.StatusOK, env.call(t, http.MethodPost, "/v2/queues", []byte(`{"queueName":"orders","parallelism":5,"paused":true}`), jsonCT...).Status)
	q2 := decodeJSON[wire.Queue](t, env.call(t, http.MethodGet, "/v2/queues/orders", nil))
	require.Equal(t, 5, q2.Parallelism)
	require.True(t, q2.Paused)
	require.Equal(t, q.CreatedAt, q2.CreatedAt)

	// Delete: then every queue route answers 404.
	require.Equal(t, http.StatusOK, env.call(t, http.MethodDelete, "/v2/queues/orders", nil).Status)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v2/queues/orders"},
		{http.MethodDelete, "/v2/queues/orders"},
		{http.MethodPost, "/v2/queues/orders/pause"},
		{http.MethodPost, "/v2/queues/orders/resume"},
	} {
		r := env.call(t, c.method, c.path, nil)
		require.Equal(t, http.StatusNotFound, r.Status, "%s %s: %s", c.method, c.path, r.Body)
		require.Contains(t, r.errorMessage(t), "orders")
	}

	// Enqueueing to a queue the project does not have creates it with parallelism 1
	// (as QStash does), by path and by Upstash-Queue-Name alike.
	for _, c := range []struct{ queue, path string }{
		{"auto-path", "/v2/enqueue/auto-path/" + env.Endpoint.URL("/auto")},
		{"auto-header", "/v2/publish/" + env.Endpoint.URL("/auto")},
	} {
		r := env.call(t, http.MethodPost, c.path, []byte("a"), "Upstash-Queue-Name", c.queue)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		env.Endpoint.waitMessage(t, decodeJSON[wire.PublishResult](t, r).MessageID)
		q := decodeJSON[wire.Queue](t, env.call(t, http.MethodGet, "/v2/queues/"+c.queue, nil))
		require.Equal(t, 1, q.Parallelism)
		require.False(t, q.Paused)
	}

	// Bad upserts.
	for _, c := range []struct {
		name, body string
		header     []string
		status     int
	}{
		{"bad name", `{"queueName":"bad name"}`, jsonCT, http.StatusBadRequest},
		{"missing name", `{"parallelism":1}`, jsonCT, http.StatusBadRequest},
		{"zero parallelism", `{"queueName":"z","parallelism":0}`, jsonCT, http.StatusBadRequest},
		{"huge parallelism", `{"queueName":"z","parallelism":10001}`, jsonCT, http.StatusBadRequest},
		{"bad JSON", `{"queueName":`, jsonCT, http.StatusBadRequest},
		{"wrong type", `{"queueName":"z","parallelism":"2"}`, jsonCT, http.StatusBadRequest},
		{"not JSON", `queueName=z`, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		{"too large", `{"queueName":"` + strings.Repeat("z", 70<<10) + `"}`, jsonCT, http.StatusRequestEntityTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := env.call(t, http.MethodPost, "/v2/queues", []byte(c.body), c.header...)
			require.Equal(t, c.status, r.Status, "%s", r.Body)
			require.NotEmpty(t, r.errorMessage(t))
		})
	}
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/v2/queues/z", nil).Status)
}

func TestAPIMessages(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})

	t.Run("get and cancel", func(t *testing.T) {
		t.Parallel()
		dest := env.Endpoint.URL("/later")
		id := env.publish(t, dest, []byte("later"), "Upstash-Delay", "1h", "Upstash-Forward-X-A", "1", "Content-Type", "text/plain")

		r := env.call(t, http.MethodGet, "/v2/messages/"+id, nil)
		require.Equal(t, http.StatusOK, r.Status)
		m := decodeJSON[wire.Message](t, r)
		require.Equal(t, id, m.MessageID)
		require.Equal(t, dest, m.URL)
		require.Equal(t, http.MethodPost, m.Method)
		require.Equal(t, "later", m.Body)
		require.Equal(t, []string{"1"}, m.Header["X-A"])
		require.Equal(t, []string{"text/plain"}, m.Header["Content-Type"])
		require.Equal(t, 3, m.MaxRetries)
		require.Equal(t, "CREATED", m.State)
		require.Greater(t, m.NotBefore, m.CreatedAt+50*60*1000)

		r = env.call(t, http.MethodDelete, "/v2/messages/"+id, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, wire.CancelResult{Cancelled: 1}, decodeJSON[wire.CancelResult](t, r))

		require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/v2/messages/"+id, nil).Status)
		require.Equal(t, http.StatusNotFound, env.call(t, http.MethodDelete, "/v2/messages/"+id, nil).Status)
		require.Len(t, env.logs(t, "messageIds="+id+"&state=CANCELLED").Events, 1)
	})

	t.Run("unknown id", func(t *testing.T) {
		t.Parallel()
		r := env.call(t, http.MethodGet, "/v2/messages/msg_nope", nil)
		require.Equal(t, http.StatusNotFound, r.Status)
		require.Contains(t, r.errorMessage(t), "msg_nope")
	})

	t.Run("bulk cancel", func(t *testing.T) {
		t.Parallel()
		a1 := env.publish(t, env.Endpoint.URL("/bulk/a1"), nil, "Upstash-Delay", "1h", "Upstash-Label", "bulk-a")
		a2 := env.publish(t, env.Endpoint.URL("/bulk/a2"), nil, "Upstash-Delay", "1h", "Upstash-Label", "bulk-a")
		b := env.publish(t, env.Endpoint.URL("/bulk/b"), nil, "Upstash-Delay", "1h", "Upstash-Label", "bulk-b")

		r := env.call(t, http.MethodDelete, "/v2/messages?label=bulk-a", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Equal(t, 2, decodeJSON[wire.CancelResult](t, r).Cancelled)
		for _, id := range []string{a1, a2} {
			require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/v2/messages/"+id, nil).Status)
		}
		require.Equal(t, http.StatusOK, env.call(t, http.MethodGet, "/v2/messages/"+b, nil).Status)

		r = env.call(t, http.MethodDelete, "/v2/messages?messageIds="+b+"&messageIds=msg_unknown", nil)
		require.Equal(t, 1, decodeJSON[wire.CancelResult](t, r).Cancelled)
		require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/v2/messages/"+b, nil).Status)

		r = env.call(t, http.MethodDelete, "/v2/messages?label=bulk-a", nil)
		require.Equal(t, 0, decodeJSON[wire.CancelResult](t, r).Cancelled)

		r = env.call(t, http.MethodDelete, "/v2/messages?fromDate=yesterday", nil)
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.Contains(t, r.errorMessage(t), "fromDate")
	})
}

func TestAPILogs(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	id1 := env.publish(t, env.Endpoint.URL("/logs/one"), []byte("1"), "Upstash-Label", "l1")
	id2 := env.publish(t, env.Endpoint.URL("/logs/two"), []byte("2"), "Upstash-Label", "l2")
	env.Endpoint.waitMessage(t, id1)
	env.Endpoint.waitMessage(t, id2)
	eventually(t, "both DELIVERED", func() bool { return len(env.logs(t, "state=DELIVERED").Events) == 2 })

	all := env.logs(t, "")
	require.Len(t, all.Events, 4)
	require.Empty(t, all.Cursor)
	for i := 1; i < len(all.Events); i++ {
		require.GreaterOrEqual(t, all.Events[i-1].Time, all.Events[i].Time, "newest first")
	}

	for _, c := range []struct {
		query string
		want  []string // message ids of the events, in any order
	}{
		{"label=l1", []string{id1, id1}},
		{"messageIds=" + id2, []string{id2, id2}},
		{"messageIds=" + id1 + "&messageIds=" + id2 + "&state=CREATED", []string{id1, id2}},
		{"messageId=" + id1 + "&state=DELIVERED", []string{id1}},
		{"url=" + url.QueryEscape(env.Endpoint.URL("/logs/two")), []string{id2, id2}},
		{"urlPrefix=" + url.QueryEscape(env.Endpoint.URL("/logs/")), []string{id1, id1, id2, id2}},
		{"path=/logs/one", []string{id1, id1}},
		{"host=" + strings.TrimPrefix(env.Endpoint.URL(""), "http://"), []string{id1, id1, id2, id2}},
		{"fromDate=" + strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10), nil},
		{"toDate=1", nil},
		{"queueName=none", nil},
		{"topicName=any", nil},
	} {
		t.Run(c.query, func(t *testing.T) {
			var ids []string
			for _, ev := range env.logs(t, c.query).Events {
				ids = append(ids, ev.MessageID)
			}
			require.ElementsMatch(t, c.want, ids)
		})
	}

	t.Run("events alias", func(t *testing.T) {
		r := env.call(t, http.MethodGet, "/v2/events?label=l2", nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Len(t, decodeJSON[wire.LogsPage](t, r).Events, 2)
	})

	t.Run("pages", func(t *testing.T) {
		var seen []wire.Log
		cursor := ""
		for page := 0; ; page++ {
			require.Less(t, page, 10)
			q := "count=3"
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			lr := env.logs(t, q)
			seen = append(seen, lr.Events...)
			if lr.Cursor == "" {
				break
			}
			cursor = lr.Cursor
		}
		require.Equal(t, all.Events, seen)

		// A unix-ms cursor means "before this time".
		require.Len(t, env.logs(t, "cursor="+strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)).Events, 4)
		require.Empty(t, env.logs(t, "cursor=1").Events)
	})

	for _, q := range []string{"cursor=bogus", "cursor=log_zz", "count=0", "count=x", "fromDate=-1", "toDate=x"} {
		t.Run("bad "+q, func(t *testing.T) {
			r := env.call(t, http.MethodGet, "/v2/logs?"+q, nil)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
			param, _, _ := strings.Cut(q, "=")
			require.Contains(t, r.errorMessage(t), param)
		})
	}
}

func TestAPIDLQ(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})

	dlq := func(t *testing.T, query string) wire.DLQPage {
		t.Helper()
		r := env.call(t, http.MethodGet, "/v2/dlq?"+query, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return decodeJSON[wire.DLQPage](t, r)
	}
	waitDLQ := func(t *testing.T, messageID string) wire.DLQMessage {
		t.Helper()
		var found wire.DLQMessage
		eventually(t, "dead letter of "+messageID, func() bool {
			l := dlq(t, "messageId="+messageID)
			if len(l.Messages) == 1 {
				found = l.Messages[0]
				return true
			}
			return false
		})
		return found
	}

	dest := env.Endpoint.URL("/fail/one")
	id1 := env.publish(t, dest, []byte("payload"), "Upstash-Retries", "0", "Upstash-Label", "dead")
	id2 := env.publish(t, env.Endpoint.URL("/fail/two"), nil, "Upstash-Retries", "0")
	d1 := waitDLQ(t, id1)
	waitDLQ(t, id2)
	require.Equal(t, 1, env.Endpoint.deliveriesOf(id1), "Upstash-Retries: 0 means one attempt")

	require.NotEmpty(t, d1.DLQID)
	require.Equal(t, dest, d1.URL)
	require.Equal(t, "payload", d1.Body)
	require.Equal(t, http.StatusInternalServerError, d1.ResponseStatus)
	require.Equal(t, "boom", d1.ResponseBody)
	require.Equal(t, 0, d1.MaxRetries)
	require.Equal(t, "FAILED", d1.State)
	require.Equal(t, []string{"dead"}, d1.Labels)
	require.NotZero(t, d1.FailedAt)
	require.Len(t, env.logs(t, "messageIds="+id1+"&state=FAILED").Events, 1)
	require.Equal(t, 404, env.call(t, http.MethodGet, "/v2/messages/"+id1, nil).Status, "a dead letter is no longer pending")

	require.Len(t, dlq(t, "").Messages, 2)
	require.Len(t, dlq(t, "responseStatus=500").Messages, 2)
	require.Empty(t, dlq(t, "responseStatus=404").Messages)
	require.Len(t, dlq(t, "label=dead").Messages, 1)
	require.Len(t, dlq(t, "dlqIds="+d1.DLQID).Messages, 1)
	page := dlq(t, "count=1")
	require.Len(t, page.Messages, 1)
	require.NotEmpty(t, page.Cursor)
	require.Len(t, dlq(t, "count=1&cursor="+page.Cursor).Messages, 1)
	for _, q := range []string{"cursor=nope", "responseStatus=abc", "count=-1"} {
		r := env.call(t, http.MethodGet, "/v2/dlq?"+q, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, q)
	}

	// Retry: a new message, delivered again (and failing again into the DLQ).
	r := env.call(t, http.MethodPost, "/v2/dlq/retry?dlqIds="+d1.DLQID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	retried := decodeJSON[wire.RetryResult](t, r)
	require.Len(t, retried.Responses, 1)
	newID := retried.Responses[0].MessageID
	require.NotEqual(t, id1, newID)
	got := env.Endpoint.waitMessage(t, newID)
	require.Equal(t, []byte("payload"), got.Body)
	require.Equal(t, "0", got.Header.Get(wire.HeaderRetried))
	require.NoError(t, verifySignature(got, testCurrentKey, testNextKey))
	d3 := waitDLQ(t, newID)
	require.Empty(t, dlq(t, "dlqIds="+d1.DLQID).Messages, "the retried dead letter is gone")

	r = env.call(t, http.MethodPost, "/v2/dlq/retry?dlqIds=dlq_unknown", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Empty(t, decodeJSON[wire.RetryResult](t, r).Responses)

	// Delete one, then the rest in bulk.
	r = env.call(t, http.MethodDelete, "/v2/dlq/"+d3.DLQID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Empty(t, r.Body)
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodDelete, "/v2/dlq/"+d3.DLQID, nil).Status)

	r = env.call(t, http.MethodDelete, "/v2/dlq?all=true", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, wire.DeleteResult{Deleted: 1}, decodeJSON[wire.DeleteResult](t, r))
	require.Empty(t, dlq(t, "").Messages)
	require.Equal(t, http.StatusBadRequest, env.call(t, http.MethodDelete, "/v2/dlq?cursor=x", nil).Status)
	require.Equal(t, http.StatusBadRequest, env.call(t, http.MethodPost, "/v2/dlq/retry?cursor=x", nil).Status)
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})

	r := env.call(t, http.MethodGet, "/v2/keys", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, keysResponse{Current: testCurrentKey, Next: testNextKey}, decodeJSON[keysResponse](t, r))

	before := env.Endpoint.waitMessage(t, env.publish(t, env.Endpoint.URL("/keys/before"), []byte("b")))
	require.NoError(t, verifySignature(before, testCurrentKey, ""))

	r = env.call(t, http.MethodPost, "/v2/keys/rotate", nil)
	require.Equal(t, http.StatusOK, r.Status)
	rotated := decodeJSON[keysResponse](t, r)
	require.Equal(t, testNextKey, rotated.Current, "the next key becomes current")
	require.NotEqual(t, testNextKey, rotated.Next)
	require.True(t, strings.HasPrefix(rotated.Next, "sig_"))
	require.Equal(t, rotated, decodeJSON[keysResponse](t, env.call(t, http.MethodGet, "/v2/keys", nil)))

	after := env.Endpoint.waitMessage(t, env.publish(t, env.Endpoint.URL("/keys/after"), []byte("a")))
	require.NoError(t, verifySignature(after, rotated.Current, ""), "signed with the new current key")
	require.Error(t, verifySignature(after, testCurrentKey, ""), "no longer signed with the old key")
	require.NoError(t, verifySignature(after, testCurrentKey, testNextKey), "receivers holding the old pair still verify")
}

func TestAPIAuth(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	dest := env.Endpoint.URL("/auth")

	routes := []struct{ method, path string }{
		{http.MethodGet, "/v2/keys"},
		{http.MethodPost, "/v2/keys/rotate"},
		{http.MethodPost, "/v2/publish/" + dest},
		{http.MethodPost, "/v2/batch"},
		{http.MethodGet, "/v2/logs"},
		{http.MethodGet, "/v2/dlq"},
		{http.MethodGet, "/v2/queues"},
		{http.MethodDelete, "/v2/messages/msg_x"},
	}
	for _, c := range []struct {
		name  string
		auth  string // Authorization header, "" for none
		query string
	}{
		{"no token", "", ""},
		{"bad token", "Bearer not-the-token", ""},
		{"not bearer", "Basic " + testToken, ""},
		{"empty bearer", "Bearer ", ""},
		{"token in query", "", "qstash_token=" + testToken},
		{"token in query and header", "Bearer " + testToken, "qstash_token=" + testToken},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, rt := range routes {
				path := rt.path
				if c.query != "" && c.auth != "" && strings.HasPrefix(path, "/v2/publish/") {
					continue // there the query belongs to the destination URL: see below
				}
				if c.query != "" {
					path += "?" + c.query
				}
				req := env.request(t, rt.method, path, []byte("[]"))
				req.Header.Del("Authorization")
				if c.auth != "" {
					req.Header.Set("Authorization", c.auth)
				}
				r := env.send(t, req)
				require.Equal(t, http.StatusUnauthorized, r.Status, "%s %s: %s", rt.method, path, r.Body)
				require.NotEmpty(t, r.errorMessage(t))
			}
		})
	}

	t.Run("destination query may name qstash_token", func(t *testing.T) {
		t.Parallel()
		r := env.send(t, env.request(t, http.MethodPost, "/v2/publish/"+env.Endpoint.URL("/q?qstash_token=x"), []byte("b")))
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	})

	t.Run("healthz needs no token", func(t *testing.T) {
		t.Parallel()
		req := env.request(t, http.MethodGet, "/healthz", nil)
		req.Header.Del("Authorization")
		r := env.send(t, req)
		require.Equal(t, http.StatusOK, r.Status)
		require.JSONEq(t, `{"status":"ok"}`, string(r.Body))
	})

	require.Empty(t, env.logs(t, "").Events, "no unauthenticated request stored anything")
	require.Equal(t, keysResponse{Current: testCurrentKey, Next: testNextKey}, decodeJSON[keysResponse](t, env.call(t, http.MethodGet, "/v2/keys", nil)), "no unauthenticated rotation")
}

// TestAPIProjectsAreIsolated: another project's token sees none of this project's
// records; its ids answer 404.
func TestAPIProjectsAreIsolated(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	other := env.withProject(t, "other", "other-token")

	require.Equal(t, http.StatusOK, env.call(t, http.MethodPost, "/v2/queues", []byte(`{"queueName":"mine"}`), "Content-Type", "application/json").Status)
	delayed := env.publish(t, env.Endpoint.URL("/mine"), []byte("x"), "Upstash-Delay", "1h", "Upstash-Label", "mine")
	failed := env.publish(t, env.Endpoint.URL("/fail/mine"), nil, "Upstash-Retries", "0")
	env.Endpoint.waitMessage(t, failed)
	var dlqID string
	eventually(t, "the dead letter", func() bool {
		l := decodeJSON[wire.DLQPage](t, env.call(t, http.MethodGet, "/v2/dlq", nil))
		if len(l.Messages) == 1 {
			dlqID = l.Messages[0].DLQID
			return true
		}
		return false
	})

	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v2/messages/" + delayed},
		{http.MethodDelete, "/v2/messages/" + delayed},
		{http.MethodGet, "/v2/queues/mine"},
		{http.MethodPost, "/v2/queues/mine/pause"},
		{http.MethodDelete, "/v2/queues/mine"},
		{http.MethodDelete, "/v2/dlq/" + dlqID},
	} {
		r := other.call(t, c.method, c.path, nil)
		require.Equal(t, http.StatusNotFound, r.Status, "%s %s: %s", c.method, c.path, r.Body)
	}
	require.Empty(t, other.logs(t, "").Events)
	require.Empty(t, decodeJSON[wire.DLQPage](t, other.call(t, http.MethodGet, "/v2/dlq", nil)).Messages)
	require.Empty(t, decodeJSON[[]wire.Queue](t, other.call(t, http.MethodGet, "/v2/queues", nil)))
	require.Zero(t, decodeJSON[wire.CancelResult](t, other.call(t, http.MethodDelete, "/v2/messages?label=mine", nil)).Cancelled)
	require.Empty(t, decodeJSON[wire.RetryResult](t, other.call(t, http.MethodPost, "/v2/dlq/retry?dlqIds="+dlqID, nil)).Responses)
	require.NotEqual(t, testCurrentKey, decodeJSON[keysResponse](t, other.call(t, http.MethodGet, "/v2/keys", nil)).Current)

	// Everything is still there for its owner.
	require.Equal(t, http.StatusOK, env.call(t, http.MethodGet, "/v2/messages/"+delayed, nil).Status)
	require.False(t, decodeJSON[wire.Queue](t, env.call(t, http.MethodGet, "/v2/queues/mine", nil)).Paused)
	require.Len(t, decodeJSON[wire.DLQPage](t, env.call(t, http.MethodGet, "/v2/dlq", nil)).Messages, 1)
}

// badInput is a request that must be refused without changing anything.
type badInput struct {
	name    string
	method  string
	path    string // "{dest}" is replaced by a loopback endpoint URL
	body    string
	header  []string
	status  int
	errPart string // the error message must contain this
}

// checkRefused sends each case and checks that it is refused and that no message was
// stored (the logs stay empty) and nothing was delivered.
func checkRefused(t *testing.T, env *apiEnv, dest string, cases []badInput) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method, header := c.method, c.header
			if method == "" {
				method = http.MethodPost
			}
			if c.path == "/v2/batch" && header == nil {
				header = []string{"Content-Type", "application/json"} // as the SDKs send it
			}
			r := env.call(t, method, strings.ReplaceAll(c.path, "{dest}", dest), []byte(c.body), header...)
			require.Equal(t, c.status, r.Status, "%s", r.Body)
			require.Contains(t, r.errorMessage(t), c.errPart)
			require.Empty(t, env.logs(t, "").Events, "a refused request stores nothing")
		})
	}
	require.Empty(t, env.Endpoint.all(), "a refused request delivers nothing")
	require.Empty(t, decodeJSON[[]wire.Queue](t, env.call(t, http.MethodGet, "/v2/queues", nil)), "a refused request creates no queue")
}

func TestAPIBadInput(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{config: func(c *Config) {
		c.MaxBodyBytes = 64
		c.MaxBatchMessages = 3
		c.MaxBatchBytes = 4096
	}})
	dest := env.Endpoint.URL("/never")
	batch := func(entries ...string) string { return "[" + strings.Join(entries, ",") + "]" }
	entry := func(headers string) string {
		return fmt.Sprintf(`{"destination":%q,"headers":%s}`, dest, headers)
	}
	pub := "/v2/publish/{dest}"
	huge := strings.Repeat("x", 65)

	checkRefused(t, env, dest, []badInput{
		{name: "malformed delay", path: pub, header: []string{"Upstash-Delay", "soon"}, status: 400, errPart: "Upstash-Delay"},
		{name: "negative delay", path: pub, header: []string{"Upstash-Delay", "-5s"}, status: 400, errPart: "Upstash-Delay"},
		{name: "delay too long", path: pub, header: []string{"Upstash-Delay", "400d"}, status: 400, errPart: "Upstash-Delay"},
		{name: "malformed not-before", path: pub, header: []string{"Upstash-Not-Before", "tomorrow"}, status: 400, errPart: "Upstash-Not-Before"},
		{name: "negative retries", path: pub, header: []string{"Upstash-Retries", "-1"}, status: 400, errPart: "Upstash-Retries"},
		{name: "non-integer retries", path: pub, header: []string{"Upstash-Retries", "three"}, status: 400, errPart: "Upstash-Retries"},
		{name: "too many retries", path: pub, header: []string{"Upstash-Retries", "101"}, status: 412, errPart: "Upstash-Retries"},
		{name: "bad retry delay", path: pub, header: []string{"Upstash-Retry-Delay", "1000 *"}, status: 400, errPart: "Upstash-Retry-Delay"},
		{name: "unknown retry delay function", path: pub, header: []string{"Upstash-Retry-Delay", "launch(retried)"}, status: 400, errPart: "Upstash-Retry-Delay"},
		{name: "zero timeout", path: pub, header: []string{"Upstash-Timeout", "0"}, status: 400, errPart: "Upstash-Timeout"},
		{name: "timeout too long", path: pub, header: []string{"Upstash-Timeout", "1h"}, status: 400, errPart: "Upstash-Timeout"},
		{name: "bad method", path: pub, header: []string{"Upstash-Method", "TRACE"}, status: 400, errPart: "Upstash-Method"},
		{name: "bad label", path: pub, header: []string{"Upstash-Label", "ok,not ok"}, status: 400, errPart: "Upstash-Label"},
		{name: "dedup id too long", path: pub, header: []string{"Upstash-Deduplication-Id", strings.Repeat("d", 257)}, status: 400, errPart: "Upstash-Deduplication-Id"},
		{name: "flow control parallelism zero", path: pub, header: []string{"Upstash-Flow-Control-Key", "k", "Upstash-Flow-Control-Value", "parallelism=0"}, status: 400, errPart: "parallelism"},
		{name: "flow control bad rate", path: pub, header: []string{"Upstash-Flow-Control-Key", "k", "Upstash-Flow-Control-Value", "rate=fast"}, status: 400, errPart: "rate"},
		{name: "flow control bad period", path: pub, header: []string{"Upstash-Flow-Control-Key", "k", "Upstash-Flow-Control-Value", "rate=1, period=forever"}, status: 400, errPart: "period"},
		{name: "flow control unknown item", path: pub, header: []string{"Upstash-Flow-Control-Key", "k", "Upstash-Flow-Control-Value", "bogus=1"}, status: 400, errPart: "bogus"},
		{name: "flow control not name=value", path: pub, header: []string{"Upstash-Flow-Control-Key", "k", "Upstash-Flow-Control-Value", "parallelism"}, status: 400, errPart: "parallelism"},
		{name: "flow control value without key", path: pub, header: []string{"Upstash-Flow-Control-Value", "parallelism=1"}, status: 400, errPart: "Upstash-Flow-Control-Key"},
		{name: "flow control bad key", path: pub, header: []string{"Upstash-Flow-Control-Key", "a key", "Upstash-Flow-Control-Value", "parallelism=1"}, status: 400, errPart: "Upstash-Flow-Control-Key"},
		{name: "callback flow control", path: pub, header: []string{"Upstash-Callback", dest, "Upstash-Callback-Flow-Control-Key", "k", "Upstash-Callback-Flow-Control-Value", "rate=0"}, status: 400, errPart: "Upstash-Callback-Flow-Control-Value rate="},
		{name: "failure callback flow control without key", path: pub, header: []string{"Upstash-Failure-Callback", dest, "Upstash-Failure-Callback-Flow-Control-Value", "rate=1"}, status: 400, errPart: "Upstash-Failure-Callback-Flow-Control-Key is required"},
		{name: "callback retries", path: pub, header: []string{"Upstash-Callback", dest, "Upstash-Callback-Retries", "-2"}, status: 400, errPart: "Upstash-Callback-Retries"},
		{name: "callback not http", path: pub, header: []string{"Upstash-Callback", "ftp://x/cb"}, status: 400, errPart: "Upstash-Callback"},
		{name: "failure callback not a URL", path: pub, header: []string{"Upstash-Failure-Callback", "not-a-url"}, status: 400, errPart: "Upstash-Failure-Callback"},
		{name: "ftp destination", path: "/v2/publish/ftp://x/file", status: 400, errPart: "destination"},
		{name: "not a URL destination", path: "/v2/publish/not%20a%20url", status: 400, errPart: "destination"},
		{name: "not a URL group", path: "/v2/publish/not-a-url", status: 404, errPart: `url group not found: "not-a-url"`},
		{name: "empty destination", path: "/v2/publish/", status: 400, errPart: "destination"},
		{name: "destination with credentials", path: "/v2/publish/http://user:pw@127.0.0.1:1/x", status: 400, errPart: "destination"},
		{name: "body over limit", path: pub, body: huge, status: 413, errPart: "64 bytes"},
		{name: "enqueue body over limit", path: "/v2/enqueue/q/{dest}", body: huge, status: 413, errPart: "64 bytes"},
		{name: "enqueue bad queue name", path: "/v2/enqueue/bad%20name/{dest}", status: 400, errPart: "queue name"},
		{name: "publish bad queue header", path: pub, header: []string{"Upstash-Queue-Name", "no way"}, status: 400, errPart: "queue name"},
		{name: "batch not JSON", path: "/v2/batch", body: "{", status: 400, errPart: "JSON array"},
		{name: "batch not an array", path: "/v2/batch", body: `{"destination":"x"}`, status: 400, errPart: "JSON array"},
		{name: "batch empty", path: "/v2/batch", body: "[]", status: 400, errPart: "empty"},
		{name: "batch oversized", path: "/v2/batch", body: batch(entry("{}"), entry("{}"), entry("{}"), entry("{}")), status: 400, errPart: "limit is 3"},
		{name: "batch entry body over limit", path: "/v2/batch", body: batch(fmt.Sprintf(`{"destination":%q,"body":%q}`, dest, huge)), status: 413, errPart: "batch[0]"},
		{name: "batch one bad entry stores none", path: "/v2/batch", body: batch(entry("{}"), entry(`{"upstash-delay":"soon"}`)), status: 400, errPart: "batch[1]: Upstash-Delay"},
		{name: "batch retries over limit", path: "/v2/batch", body: batch(entry(`{"upstash-retries":"101"}`)), status: 412, errPart: "batch[0]"},
		{name: "batch forwarded CR LF", path: "/v2/batch", body: batch(entry(`{"upstash-forward-x-a":"v\r\nInjected: 1"}`)), status: 400, errPart: "control character 0x0d"},
		{name: "batch forwarded bad header name", path: "/v2/batch", body: batch(entry(`{"Upstash-Forward-X(y)":"v"}`)), status: 400, errPart: "invalid header name"},
		{name: "batch forwarded NUL", path: "/v2/batch", body: batch(entry(`{"upstash-forward-x-a":"v\u0000"}`)), status: 400, errPart: "control character 0x00"},
		// What the sender cannot send is refused here, with the header named: accepted,
		// it would fail every attempt.
		{name: "batch forwarded control character", path: "/v2/batch", body: batch(entry(`{"Upstash-Forward-X-Note":"a\u0001b"}`)), status: 400, errPart: "batch[0]: header Upstash-Forward-X-Note: value has the control character 0x01"},
		{name: "batch forwarded DEL", path: "/v2/batch", body: batch(entry(`{"upstash-forward-x-a":"a\u007fb"}`)), status: 400, errPart: "header Upstash-Forward-X-A"},
		{name: "batch callback forwarded control character", path: "/v2/batch", body: batch(entry(fmt.Sprintf(`{"upstash-callback":%q,"upstash-callback-forward-x":"a\u0002"}`, dest))), status: 400, errPart: "Upstash-Callback-Forward-X"},
		{name: "batch bad queue", path: "/v2/batch", body: batch(entry("{}"), fmt.Sprintf(`{"destination":%q,"queue":"a b"}`, dest)), status: 400, errPart: "batch[1]: queue name"},
		{name: "batch bad destination", path: "/v2/batch", body: batch(`{"destination":"ftp://x"}`), status: 400, errPart: "batch[0]: destination"},
		{name: "batch too large", path: "/v2/batch", body: batch(strings.Repeat(entry("{}")+",", 100) + entry("{}")), status: 413, errPart: "4096 bytes"},
	})
}

// TestAPIServeMode runs with the production destination policy: loopback, private and
// link-local addresses are refused at publish time.
func TestAPIServeMode(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{serveMode: true})
	public := "https://example.com/hook"
	checkRefused(t, env, public, []badInput{
		{name: "callback to private IP", path: "/v2/publish/{dest}", header: []string{"Upstash-Callback", "http://10.0.0.1/cb"}, status: 400, errPart: "Upstash-Callback"},
		{name: "failure callback to metadata IP", path: "/v2/publish/{dest}", header: []string{"Upstash-Failure-Callback", "http://169.254.169.254/latest"}, status: 400, errPart: "Upstash-Failure-Callback"},
		{name: "callback to loopback", path: "/v2/publish/{dest}", header: []string{"Upstash-Callback", "http://127.0.0.1:9/cb"}, status: 400, errPart: "Upstash-Callback"},
		{name: "loopback destination", path: "/v2/publish/http://127.0.0.1:9/x", status: 400, errPart: "destination"},
		{name: "legacy loopback spelling", path: "/v2/publish/http://2130706433/x", status: 400, errPart: "destination"},
		{name: "IPv6 loopback", path: "/v2/publish/http://[::1]:9/x", status: 400, errPart: "destination"},
		{name: "private destination in batch", path: "/v2/batch", body: `[{"destination":"http://192.168.1.1/x"}]`, status: 400, errPart: "batch[0]: destination"},
	})
}

// TestForwardedHeadersRefuseCRLF covers what an HTTP client cannot send as a real
// header (Go refuses CR/LF client-side and net/http server-side): the parser itself.
func TestForwardedHeadersRefuseCRLF(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"a\r\nInjected: 1", "a\nb", "a\rb", "a\x00b", strings.Repeat("v", maxHeaderValueLen+1)} {
		_, err := forwardedHeaders(http.Header{"Upstash-Forward-X": {v}}, wire.PrefixForward, true)
		require.Error(t, err, "%q", v)
		require.Equal(t, http.StatusBadRequest, errStatus(err))
		require.Contains(t, err.Error(), "Upstash-Forward-X")
	}
	out, err := forwardedHeaders(http.Header{"Upstash-Forward-X": {"ok"}, "Upstash-Forward-Host": {"evil"}, "Content-Type": {"text/plain"}}, wire.PrefixForward, true)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"X": {"ok"}, "Content-Type": {"text/plain"}}, out, "hop-by-hop dropped, content type kept")
}

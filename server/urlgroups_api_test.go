package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/stretchr/testify/require"
)

func endpointsBody(t *testing.T, eps ...map[string]string) []byte {
	raw, err := json.Marshal(map[string]any{"endpoints": eps})
	require.NoError(t, err)
	return raw
}

func (e *apiEnv) addEndpoints(t *testing.T, group string, eps ...map[string]string) {
	t.Helper()
	r := e.call(t, http.MethodPost, "/v2/topics/"+group+"/endpoints", endpointsBody(t, eps...), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

func TestURLGroupsAPI(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	a, b := env.Endpoint.URL("/a"), env.Endpoint.URL("/b")

	env.addEndpoints(t, "g1", map[string]string{"name": "first", "url": a}, map[string]string{"url": b})
	r := env.call(t, http.MethodGet, "/v2/topics/g1", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	g := decodeJSON[urlGroupView](t, r)
	require.Equal(t, "g1", g.Name)
	require.NotZero(t, g.CreatedAt)
	require.Len(t, g.Endpoints, 2)
	require.Equal(t, "first", g.Endpoints[0].Name)
	require.Equal(t, a, g.Endpoints[0].URL)

	// Same name: replaced, not added.
	c := env.Endpoint.URL("/c")
	env.addEndpoints(t, "g1", map[string]string{"name": "first", "url": c})
	g = decodeJSON[urlGroupView](t, env.call(t, http.MethodGet, "/v2/topics/g1", nil))
	require.Len(t, g.Endpoints, 2)
	require.ElementsMatch(t, []string{b, c}, []string{g.Endpoints[0].URL, g.Endpoints[1].URL})

	env.addEndpoints(t, "g2", map[string]string{"url": a})
	list := decodeJSON[[]urlGroupView](t, env.call(t, http.MethodGet, "/v2/topics", nil))
	require.Len(t, list, 2)

	// Removing an endpoint the group does not have changes nothing.
	r = env.call(t, http.MethodDelete, "/v2/topics/g1/endpoints", endpointsBody(t, map[string]string{"name": "first"}, map[string]string{"url": env.Endpoint.URL("/nope")}), "Content-Type", "application/json")
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "/nope")
	require.Len(t, decodeJSON[urlGroupView](t, env.call(t, http.MethodGet, "/v2/topics/g1", nil)).Endpoints, 2)
	r = env.call(t, http.MethodDelete, "/v2/topics/g1/endpoints", endpointsBody(t, map[string]string{"name": "first"}), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	g = decodeJSON[urlGroupView](t, env.call(t, http.MethodGet, "/v2/topics/g1", nil))
	require.Equal(t, []string{b}, []string{g.Endpoints[0].URL})

	other := env.withProject(t, "other", "other-token")
	require.Equal(t, http.StatusNotFound, other.call(t, http.MethodGet, "/v2/topics/g1", nil).Status)
	require.Equal(t, http.StatusNotFound, other.call(t, http.MethodDelete, "/v2/topics/g1", nil).Status)
	require.Equal(t, http.StatusNotFound, other.call(t, http.MethodPost, "/v2/publish/g1", []byte("x")).Status, "another project's group")
	require.Empty(t, decodeJSON[[]urlGroupView](t, other.call(t, http.MethodGet, "/v2/topics", nil)))

	r = env.call(t, http.MethodDelete, "/v2/topics/g1", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodGet, "/v2/topics/g1", nil)
	require.Equal(t, http.StatusNotFound, r.Status)
	require.Equal(t, `url group not found: "g1"`, r.errorMessage(t))
}

// TestURLGroupEndpointURLNormalised: an endpoint URL whose query needs escaping is
// stored escaped, and removing it by the URL as first given still finds it.
func TestURLGroupEndpointURLNormalised(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	raw := env.Endpoint.URL(`/a?q="a b"`)
	env.addEndpoints(t, "g", map[string]string{"url": raw}, map[string]string{"url": env.Endpoint.URL("/b")})
	g := decodeJSON[urlGroupView](t, env.call(t, http.MethodGet, "/v2/topics/g", nil))
	require.Equal(t, env.Endpoint.URL("/a?q=%22a%20b%22"), g.Endpoints[0].URL)
	r := env.call(t, http.MethodDelete, "/v2/topics/g/endpoints", endpointsBody(t, map[string]string{"url": raw}), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	g = decodeJSON[urlGroupView](t, env.call(t, http.MethodGet, "/v2/topics/g", nil))
	require.Equal(t, []string{env.Endpoint.URL("/b")}, []string{g.Endpoints[0].URL})
}

// TestURLGroupFanOut: a publication to a group is one message per endpoint, each with
// its own id, retries and logs.
func TestURLGroupFanOut(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	env.addEndpoints(t, "fan",
		map[string]string{"name": "one", "url": env.Endpoint.URL("/one")},
		map[string]string{"url": env.Endpoint.URL("/two")},
		map[string]string{"name": "bad", "url": env.Endpoint.URL("/fail")})

	r := env.call(t, http.MethodPost, "/v2/publish/fan", []byte("hello"), "Upstash-Retries", "1", "Upstash-Retry-Delay", "10", "Upstash-Forward-X-A", "a")
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	res := decodeJSON[[]wire.PublishResult](t, r)
	require.Len(t, res, 3)
	ids := map[string]bool{}
	for _, p := range res {
		ids[p.MessageID] = true
	}
	require.Len(t, ids, 3, "each endpoint's message has its own id")

	env.Endpoint.waitN(t, 1, func(q recorded) bool { return strings.HasSuffix(q.URL, "/one") })
	env.Endpoint.waitN(t, 1, func(q recorded) bool { return strings.HasSuffix(q.URL, "/two") })
	fails := env.Endpoint.waitN(t, 2, func(q recorded) bool { return strings.HasSuffix(q.URL, "/fail") })
	require.Equal(t, fails[0].Header.Get("Upstash-Message-Id"), fails[1].Header.Get("Upstash-Message-Id"), "the failing endpoint retries its own message")
	for _, q := range env.Endpoint.all() {
		require.Equal(t, "hello", string(q.Body))
		require.Equal(t, "a", q.Header.Get("X-A"))
	}

	failedID := fails[0].Header.Get("Upstash-Message-Id")
	eventually(t, "the failing endpoint's message dead-lettered", func() bool {
		return len(env.logs(t, "messageId="+failedID+"&state=FAILED").Events) == 1
	})
	// An endpoint has the request before its outcome is committed (on PostgreSQL a
	// clean-clone CI run queried in between): wait for both outcomes, then check them.
	var logs wire.LogsPage
	eventually(t, "the two good endpoints' deliveries recorded", func() bool {
		logs = env.logs(t, "topicName=fan&state=DELIVERED")
		return len(logs.Events) >= 2
	})
	require.Len(t, logs.Events, 2, "the two good endpoints delivered once each")
	names := map[string]string{}
	for _, ev := range logs.Events {
		require.Equal(t, "fan", ev.TopicName)
		names[ev.URL] = ev.EndpointName
	}
	require.Equal(t, map[string]string{env.Endpoint.URL("/one"): "one", env.Endpoint.URL("/two"): ""}, names)
	require.Empty(t, env.logs(t, "topicName=other").Events)

	dlq := env.call(t, http.MethodGet, "/v2/dlq?topicName=fan", nil)
	require.Equal(t, http.StatusOK, dlq.Status)
	require.Contains(t, string(dlq.Body), `"endpointName":"bad"`)
}

func TestURLGroupBatchAndDedup(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	env.addEndpoints(t, "pair", map[string]string{"url": env.Endpoint.URL("/p1")}, map[string]string{"url": env.Endpoint.URL("/p2")})

	batch, err := json.Marshal([]map[string]any{
		{"destination": "pair", "body": "g"},
		{"destination": env.Endpoint.URL("/single"), "body": "s"},
	})
	require.NoError(t, err)
	r := env.call(t, http.MethodPost, "/v2/batch", batch, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var out []json.RawMessage
	require.NoError(t, json.Unmarshal(r.Body, &out))
	require.Len(t, out, 2)
	var group []wire.PublishResult
	require.NoError(t, json.Unmarshal(out[0], &group), "a group entry answers an array: %s", out[0])
	require.Len(t, group, 2)
	var single wire.PublishResult
	require.NoError(t, json.Unmarshal(out[1], &single), "a URL entry answers an object: %s", out[1])
	require.Equal(t, env.Endpoint.URL("/single"), single.URL)
	env.Endpoint.waitN(t, 3, func(recorded) bool { return true })

	// A deduplication id applies per endpoint: both get the first, neither the second.
	first := decodeJSON[[]wire.PublishResult](t, env.call(t, http.MethodPost, "/v2/publish/pair", []byte("d"), "Upstash-Deduplication-Id", "once"))
	require.Len(t, first, 2)
	require.False(t, first[0].Deduplicated || first[1].Deduplicated)
	again := decodeJSON[[]wire.PublishResult](t, env.call(t, http.MethodPost, "/v2/publish/pair", []byte("d"), "Upstash-Deduplication-Id", "once"))
	require.True(t, again[0].Deduplicated && again[1].Deduplicated)
	require.Equal(t, []string{first[0].MessageID, first[1].MessageID}, []string{again[0].MessageID, again[1].MessageID})

	// Enqueue to a group: every endpoint's message goes through the queue (paused, so
	// they stay to be read).
	r = env.call(t, http.MethodPost, "/v2/queues", []byte(`{"queueName":"qq","parallelism":1,"paused":true}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodPost, "/v2/enqueue/qq/pair", []byte("q"))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	for _, p := range decodeJSON[[]wire.PublishResult](t, r) {
		r := env.call(t, http.MethodGet, "/v2/messages/"+url.PathEscape(p.MessageID), nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		m := decodeJSON[wire.Message](t, r)
		require.Equal(t, "qq", m.QueueName)
		require.Equal(t, "pair", m.TopicName)
	}
}

func TestURLGroupsRejectBadInput(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{config: func(c *Config) { c.MaxBatchMessages = 3 }})
	json := "application/json"
	for _, c := range []struct {
		name, method, path string
		body               string
		status             int
		want               string
	}{
		{"BadURL", "POST", "/v2/topics/g/endpoints", `{"endpoints":[{"url":"ftp://x"}]}`, 400, "endpoints[0].url"},
		{"NoURL", "POST", "/v2/topics/g/endpoints", `{"endpoints":[{"name":"n"}]}`, 400, "endpoints[0].url is required"},
		{"Empty", "POST", "/v2/topics/g/endpoints", `{"endpoints":[]}`, 400, "endpoints is empty"},
		{"BadGroupName", "POST", "/v2/topics/a%20b/endpoints", `{"endpoints":[{"url":"http://127.0.0.1:1/x"}]}`, 400, "group name"},
		{"BadEndpointName", "POST", "/v2/topics/g/endpoints", `{"endpoints":[{"name":"a b","url":"http://127.0.0.1:1/x"}]}`, 400, "endpoints[0].name"},
		{"NotJSON", "POST", "/v2/topics/g/endpoints", `{`, 400, "body must be"},
		{"RemoveFromMissing", "DELETE", "/v2/topics/nope/endpoints", `{"endpoints":[{"name":"x"}]}`, 404, "url group not found"},
		{"PublishToMissing", "POST", "/v2/publish/nope", "x", 404, `url group not found: "nope"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := env.call(t, c.method, c.path, []byte(c.body), "Content-Type", json)
			require.Equal(t, c.status, r.Status, "%s", r.Body)
			require.Contains(t, r.errorMessage(t), c.want)
		})
	}

	eps := make([]map[string]string, 101)
	for i := range eps {
		eps[i] = map[string]string{"url": env.Endpoint.URL(fmt.Sprintf("/e%d", i))}
	}
	r := env.call(t, http.MethodPost, "/v2/topics/big/endpoints", endpointsBody(t, eps...), "Content-Type", json)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "101 endpoints, the limit is 100")

	env.addEndpoints(t, "four", eps[:4]...)
	r = env.call(t, http.MethodPost, "/v2/batch", []byte(`[{"destination":"four","body":"x"}]`), "Content-Type", json)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "more than 3 messages")

	env.addEndpoints(t, "emptied", eps[0])
	r = env.call(t, http.MethodDelete, "/v2/topics/emptied/endpoints", endpointsBody(t, eps[0]), "Content-Type", json)
	require.Equal(t, http.StatusOK, r.Status)
	r = env.call(t, http.MethodPost, "/v2/publish/emptied", []byte("x"))
	require.Equal(t, http.StatusBadRequest, r.Status)
	require.Equal(t, `URL group "emptied" has no endpoints`, r.errorMessage(t))

	require.Empty(t, env.Endpoint.all(), "nothing was published")
	require.Len(t, decodeJSON[[]urlGroupView](t, env.call(t, http.MethodGet, "/v2/topics", nil)), 2, "only the valid groups exist")
}

// TestURLGroupBatchOfOneGroupOfOne: a batch whose only entry is a group of one endpoint
// still answers that entry with an array (the one-message answer shortcut of the step
// publish must not take it for a plain entry).
func TestURLGroupBatchOfOneGroupOfOne(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	env.addEndpoints(t, "solo", map[string]string{"url": env.Endpoint.URL("/solo")})
	batch, err := json.Marshal([]map[string]any{{"destination": "solo", "body": "g"}})
	require.NoError(t, err)
	r := env.call(t, http.MethodPost, "/v2/batch", batch, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	var out [][]wire.PublishResult
	require.NoError(t, json.Unmarshal(r.Body, &out), "a group entry answers an array: %s", r.Body)
	require.Len(t, out, 1)
	require.Len(t, out[0], 1)
	require.Equal(t, env.Endpoint.URL("/solo"), out[0][0].URL)
}

package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/stretchr/testify/require"
)

// TestRedactFields: Upstash-Redact-Fields hides the body and the named (or all) headers
// in what the API shows — messages, dead letters, a callback's body, schedules — while
// the delivery itself is unchanged.
func TestRedactFields(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})

	pending := env.publish(t, env.Endpoint.URL("/later"), []byte("secret body"),
		"Upstash-Delay", "1h", "Upstash-Redact-Fields", "body, header[X-Secret]",
		"Upstash-Forward-X-Secret", "s3cr3t", "Upstash-Forward-X-Plain", "plain")
	r := env.call(t, http.MethodGet, "/v2/messages/"+pending, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	m := decodeJSON[wire.Message](t, r)
	require.Equal(t, "REDACTED", m.Body)
	require.Equal(t, []string{"REDACTED"}, m.Header["X-Secret"])
	require.Equal(t, []string{"plain"}, m.Header["X-Plain"])
	require.NotContains(t, string(r.Body), "s3cr3t")
	require.NotContains(t, string(r.Body), "secret body")

	failed := env.publish(t, env.Endpoint.URL("/fail/x"), []byte("secret body"),
		"Upstash-Retries", "0", "Upstash-Redact-Fields", "header",
		"Upstash-Forward-X-Secret", "s3cr3t", "Upstash-Forward-X-Plain", "visible-value",
		"Upstash-Callback", env.Endpoint.URL("/fail/cb"), "Upstash-Callback-Retries", "0")
	got := env.Endpoint.waitMessage(t, failed)
	require.Equal(t, "s3cr3t", got.Header.Get("X-Secret"), "the delivery is unchanged")
	require.Equal(t, "secret body", string(got.Body))
	cb := env.Endpoint.waitN(t, 1, func(q recorded) bool { return strings.HasSuffix(q.URL, "/fail/cb") })[0]
	require.Contains(t, string(cb.Body), `"sourceHeader"`, "the callback itself gets the source's headers")

	var dlq string
	eventually(t, "the message and its callback dead-lettered", func() bool {
		r := env.call(t, http.MethodGet, "/v2/dlq", nil)
		var list struct{ Messages []json.RawMessage }
		require.NoError(t, json.Unmarshal(r.Body, &list))
		dlq = string(r.Body)
		return len(list.Messages) == 2
	})
	require.NotContains(t, dlq, "s3cr3t", "no dead letter shows the header: %s", dlq)
	require.NotContains(t, dlq, "visible-value", "header: every header is hidden")
	require.Contains(t, dlq, `"body":"secret body"`, "the body was not asked to be hidden")
	require.Contains(t, dlq, `"body":"REDACTED"`, "the callback's body (carrying the source's headers) is hidden")

	r = env.call(t, http.MethodPost, "/v2/schedules/"+env.Endpoint.URL("/s"), []byte("secret body"), "Upstash-Cron", "@daily", "Upstash-Redact-Fields", "body")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	id := decodeJSON[map[string]string](t, r)["scheduleId"]
	require.Equal(t, "REDACTED", decodeJSON[scheduleView](t, env.call(t, http.MethodGet, "/v2/schedules/"+id, nil)).Body)

	for _, bad := range []string{"bogus", "header[a b]", "body,headers"} {
		r := env.call(t, http.MethodPost, "/v2/publish/"+env.Endpoint.URL("/x"), []byte("b"), "Upstash-Redact-Fields", bad)
		require.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", bad, r.Body)
		require.Contains(t, r.errorMessage(t), "Upstash-Redact-Fields")
	}
}

package server

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/stretchr/testify/require"
)

// TestBulkDeleteQueryIsStrict: a destructive bulk route never ignores what it does not
// understand, repeated filter values mean OR, and selecting everything must be explicit.
func TestBulkDeleteQueryIsStrict(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	pending := func(id string) bool {
		t.Helper()
		return env.call(t, http.MethodGet, "/v2/messages/"+id, nil).Status == http.StatusOK
	}
	dest := env.Endpoint.URL("/bulk")
	a := env.publish(t, dest, []byte("a"), "Upstash-Delay", "1h", "Upstash-Label", "a")
	b := env.publish(t, dest, []byte("b"), "Upstash-Delay", "1h", "Upstash-Label", "b")
	c := env.publish(t, dest, []byte("c"), "Upstash-Delay", "1h", "Upstash-Label", "c")

	for _, q := range []string{
		"lable=a",                   // misspelt filter
		"label=a&lable=b",           // a known filter does not excuse an unknown one
		"",                          // no filter at all
		"all=yes",                   // all takes true only
		"all=true&label=a",          // contradictory
		"label=a&count=1&count=2",   // single-valued parameter repeated
		"label=a&failureFunction=x", // a filter this route does not have
	} {
		r := env.call(t, http.MethodDelete, "/v2/messages?"+q, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", q, r.Body)
		require.NotEmpty(t, r.errorMessage(t))
	}
	require.Contains(t, env.call(t, http.MethodDelete, "/v2/messages?lable=a", nil).errorMessage(t), `"lable"`)
	require.True(t, pending(a) && pending(b) && pending(c), "a refused bulk cancel cancels nothing")

	r := env.call(t, http.MethodDelete, "/v2/messages?label=a&label=b", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, 2, decodeJSON[wire.CancelResult](t, r).Cancelled, "label=a&label=b means a OR b")
	require.True(t, !pending(a) && !pending(b) && pending(c))

	// What @upstash/qstash 2.12.0 sends for messages.cancel({ all: true }): count only.
	r = env.call(t, http.MethodDelete, "/v2/messages?count=100", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, 1, decodeJSON[wire.CancelResult](t, r).Cancelled)
	d := env.publish(t, dest, []byte("d"), "Upstash-Delay", "1h")
	r = env.call(t, http.MethodDelete, "/v2/messages?all=true", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, 1, decodeJSON[wire.CancelResult](t, r).Cancelled)
	require.False(t, pending(d))

	e := env.publish(t, dest, []byte("e"), "Upstash-Delay", "1h")
	for _, call := range []struct{ method, path string }{
		{http.MethodDelete, "/v2/dlq?lable=x"},
		{http.MethodDelete, "/v2/dlq"},
		{http.MethodPost, "/v2/dlq/retry"},
		{http.MethodPost, "/v2/dlq/retry?qeueName=x"},
		{http.MethodDelete, "/v2/workflows/dlq?workflowUrl=x&failureFunctionState=y"},
		{http.MethodPost, "/v2/workflows/dlq/resume"},
		{http.MethodPost, "/v2/workflows/dlq/restart?labl=x"},
		{http.MethodDelete, "/v2/workflows/runs"},
		{http.MethodDelete, "/v2/workflows/runs?workflowUrl=" + url.QueryEscape(dest) + "&urlStartingWith=x"},
		{http.MethodDelete, "/v2/messages/" + c + "?force=true"},
		{http.MethodDelete, "/v2/queues/q?x=1"},
		{http.MethodDelete, "/v2/dlq/dlq_x?y=1"},
	} {
		r := env.call(t, call.method, call.path, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s %s: %s", call.method, call.path, r.Body)
	}
	require.True(t, pending(e), "refused requests changed nothing")
}

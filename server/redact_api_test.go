package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/sdk/wire"
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

// TestCallCredentialHeadersHidden: every credential header of a workflow call — an AI
// step's X-Goog-Api-Key or OpenAI-Organization, a plain call's cookie — reaches the
// called API, and no view (messages, dead letters, workflow dead letters) nor the
// callback's sourceHeader shows it; other headers stay visible.
func TestCallCredentialHeadersHidden(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"X-Goog-Api-Key": "goog-secret-1", "Openai-Organization": "org-secret-2", "Openai-Project": "proj-secret-3",
		"Cookie": "sid=cookie-secret-4", "X-Amz-Security-Token": "amz-secret-5", "X-Custom-Auth": "custom-secret-6",
	}
	provider := deliverytest.NewEndpoint(t, nil)
	wf := deliverytest.NewEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		return http.StatusOK, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, "{}"
	})
	env := newAPI(t, envOptions{})
	wfURL := wf.URL("/wf")
	// The capped workflow's AI step has no price, so the cap stops it: a dead letter.
	env.mustPutApp(t, "calls", fmt.Sprintf(`{"workflows": [
		{"name": "plain", "url": %q, "triggers": [{"event": "plain"}]},
		{"name": "capped", "url": %q, "triggers": [{"event": "capped"}], "cap": {"maxCost": 10}}]}`, wfURL, wfURL))
	plainRun := env.sendEvents(t, `{"name": "plain", "data": {}}`)[0].Runs[0].RunID
	cappedRun := env.sendEvents(t, `{"name": "capped", "data": {}}`)[0].Runs[0].RunID
	wf.Requests.Wait(t, waitTimeout, 2, nil)

	extra := map[string]string{"Upstash-Forward-Anthropic-Version": "2023-06-01"}
	for name, v := range secrets {
		extra["Upstash-Forward-"+name] = v
	}
	publish := func(runID, path string, step int, more ...string) string {
		h := maps.Clone(extra)
		for i := 0; i < len(more); i += 2 {
			h[more[i]] = more[i+1]
		}
		r := publishCallsTo(t, env, runID, wfURL, provider.URL(path), h, step)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		return decodeJSON[[]struct{ MessageID string }](t, r)[0].MessageID
	}
	later := publish(plainRun, "/plain/api", 1, "Upstash-Delay", "1h") // pending: GET /v2/messages shows it
	publish(plainRun, "/plain/api", 2)
	publish(cappedRun, "/v1/chat/completions", 1)

	got := provider.Requests.Wait(t, waitTimeout, 1, nil)[0]
	for name, v := range secrets {
		require.Equal(t, v, got.Header.Get(name), "the called API gets %s", name)
	}
	views := []string{}
	for _, cb := range wf.Requests.Wait(t, waitTimeout, 1, func(r deliverytest.Request) bool { return r.Header.Get("Upstash-Workflow-Callback") == "true" }) {
		views = append(views, "callback "+string(cb.Body))
	}
	eventually(t, "the capped call dead-lettered", func() bool {
		r := env.call(t, http.MethodGet, "/v2/dlq", nil)
		return strings.Contains(string(r.Body), "/v1/chat/completions")
	})
	dlq := decodeJSON[struct{ Messages []wire.DLQMessage }](t, env.call(t, http.MethodGet, "/v2/dlq", nil)).Messages
	require.Len(t, dlq, 1)
	for _, path := range []string{"/v2/dlq", "/v2/workflows/dlq", "/v2/messages/" + later} {
		r := env.call(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.Status, "GET %s: %s", path, r.Body)
		views = append(views, path+" "+string(r.Body))
	}
	for _, v := range views {
		for name, secret := range secrets {
			require.NotContains(t, v, secret, "%s shows %s", v, name)
		}
		require.Contains(t, v, "2023-06-01", "other headers stay visible: %s", v)
	}
	m := decodeJSON[wire.Message](t, env.call(t, http.MethodGet, "/v2/messages/"+later, nil))
	require.Equal(t, []string{"REDACTED"}, m.Header["X-Goog-Api-Key"], "a plain call hides its credentials too")
	require.Equal(t, []string{"2023-06-01"}, m.Header["Anthropic-Version"])
	require.Equal(t, []string{"REDACTED"}, dlq[0].Header["Openai-Organization"])
}

func TestCredentialHeader(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"Authorization", "proxy-authorization", "X-Api-Key", "api-key", "X-Goog-Api-Key",
		"OpenAI-Organization", "OpenAI-Project", "Cookie", "X-Amz-Security-Token", "X-Session-Id", "Ocp-Apim-Subscription-Key",
		"X-Client-Secret", "X-Password", "X-Signature", "X-Auth-Token", "X-Credential"} {
		require.True(t, delivery.CredentialHeader(name), name)
	}
	for _, name := range []string{"Content-Type", "Accept", "Anthropic-Version", "User-Agent", "Upstash-Workflow-Runid", "X-Request-Id"} {
		require.False(t, delivery.CredentialHeader(name), name)
	}
}

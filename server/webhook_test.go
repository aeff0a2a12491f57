package server

// Security tests of the public webhook route (issue 14, finding 1): only a waiter created
// by createWebhook, addressed by the secret the server put into the webhook URL, can be
// resolved without a token; every other call answers the same 404.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duraton/duraton/sdk/wire"
	"github.com/stretchr/testify/require"
)

// createWebhookStep is the step object @upstash/workflow publishes for context.createWebhook
// (docs/protocol.md, "Waits, notify and webhooks"): out is a JSON string the SDK built itself.
func createWebhookStep(t *testing.T, baseURL, userID, runID, eventID string, stepID int) string {
	t.Helper()
	out, err := json.Marshal(map[string]string{
		"webhookUrl": baseURL + "/v2/workflows/hooks/" + userID + "/" + runID + "/" + eventID,
		"eventId":    eventID,
	})
	require.NoError(t, err)
	step, err := json.Marshal(map[string]any{"stepId": stepID, "stepName": "make-hook", "stepType": "CreateWebhook", "concurrent": 1, "out": string(out)})
	require.NoError(t, err)
	return string(step)
}

// webhookOf publishes a CreateWebhook step for runID and returns the webhook the run sees
// in its next delivery's history (what the SDK hands to the route function).
func webhookOf(t *testing.T, env *apiEnv, ep *recorder, runID, wfURL, eventID string) (hookURL, hookEvent string) {
	t.Helper()
	msg := env.step(t, runID, wfURL, createWebhookStep(t, env.URL, testProject, runID, eventID, 1))
	h := history(t, ep.waitMessage(t, msg))
	step := stepObject(t, h[len(h)-1])
	require.Equal(t, "CreateWebhook", step["stepType"])
	var out struct {
		WebhookURL string `json:"webhookUrl"`
		EventID    string `json:"eventId"`
	}
	require.NoError(t, json.Unmarshal([]byte(step["out"].(string)), &out), "out %v", step["out"])
	return out.WebhookURL, out.EventID
}

func waitForWebhookBody(wfURL, stepName string, stepID int) []byte {
	return fmt.Appendf(nil, `{"url":%q,"timeout":"1h","step":{"stepId":%d,"stepType":"WaitForWebhook","stepName":%q,"concurrent":1}}`, wfURL, stepID, stepName)
}

// callHook calls a webhook URL without a token.
func callHook(t *testing.T, env *apiEnv, method, rawURL, body string) apiResponse {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	return env.send(t, req)
}

func TestWebhookResolvesOnlyItsOwnWaiterBySecret(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)

	t.Run("the URL carries a secret of at least 128 bits and resolves the webhook wait", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_sec_ok"
		wfURL := ep.URL("/wf/sec-ok")
		ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
		hookURL, eventID := webhookOf(t, env, ep, runID, wfURL, "evt_okokokokokokoko")
		require.Equal(t, "evt_okokokokokokoko", eventID, "the event id the SDK chose stays")
		u, err := url.Parse(hookURL)
		require.NoError(t, err)
		last := u.Path[strings.LastIndex(u.Path, "/")+1:]
		event, secret, ok := strings.Cut(last, ".")
		require.True(t, ok, "webhook URL %s has no secret", hookURL)
		require.Equal(t, eventID, event)
		raw, err := base64.RawURLEncoding.DecodeString(secret)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(raw)*8, 128)

		r := env.call(t, http.MethodPost, "/v2/wait/"+eventID, waitForWebhookBody(wfURL, "wait-hook", 2), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r = callHook(t, env, http.MethodPost, hookURL+"?x=1", "paid")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		h := history(t, deliveriesOfRun(t, ep, runID, 3)[2])
		got := stepObject(t, h[len(h)-1])
		require.Equal(t, "wait-hook", got["stepName"])
		var ev hookEvent
		decoded, err := base64.StdEncoding.DecodeString(got["out"].(string))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(decoded, &ev))
		require.Equal(t, b64("paid"), ev.Body)
		require.Equal(t, http.MethodPost, ev.Method)
	})

	t.Run("a call before the wait is kept (lookback)", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_sec_early"
		wfURL := ep.URL("/wf/sec-early")
		ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
		hookURL, eventID := webhookOf(t, env, ep, runID, wfURL, "evt_early")
		r := callHook(t, env, http.MethodPut, hookURL, "early")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r = env.call(t, http.MethodPost, "/v2/wait/"+eventID, waitForWebhookBody(wfURL, "wait-hook", 2), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		h := history(t, deliveriesOfRun(t, ep, runID, 3)[2])
		decoded, err := base64.StdEncoding.DecodeString(stepObject(t, h[len(h)-1])["out"].(string))
		require.NoError(t, err)
		var ev hookEvent
		require.NoError(t, json.Unmarshal(decoded, &ev))
		require.Equal(t, http.MethodPut, ev.Method)
	})

	t.Run("every other call answers the same 404 and resolves nothing", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_sec_attack"
		wfURL := ep.URL("/wf/sec-attack")
		ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
		hookURL, eventID := webhookOf(t, env, ep, runID, wfURL, "evt_attack")
		secret := hookURL[strings.LastIndex(hookURL, ".")+1:]
		// An approval step: a waitForEvent waiter, which only an authenticated notify may resolve.
		r := env.call(t, http.MethodPost, "/v2/wait/evt_approve", waitBody(wfURL, `"1h"`, "approve"), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r = env.call(t, http.MethodPost, "/v2/wait/"+eventID, waitForWebhookBody(wfURL, "wait-hook", 2), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

		base := env.URL + "/v2/workflows/hooks/"
		wrong := strings.Repeat("A", len(secret))
		var bodies []string
		for _, path := range []string{
			testProject + "/" + runID + "/evt_approve",                    // waitForEvent waiter, no secret
			testProject + "/" + runID + "/evt_approve." + secret,          // waitForEvent waiter, another hook's secret
			testProject + "/" + runID + "/" + eventID,                     // the webhook without its secret
			testProject + "/" + runID + "/" + eventID + "." + wrong,       // wrong secret
			testProject + "/" + runID + "/" + eventID + "." + secret[:10], // truncated secret
			testProject + "/wfr_no_such_run/" + eventID + "." + secret,    // unknown run
			"no-such-user/" + runID + "/" + eventID + "." + secret,        // unknown project
			testProject + "/" + runID + "/evt_unknown." + secret,          // unknown event
		} {
			for _, method := range []string{http.MethodPost, http.MethodGet, "PROPFIND"} {
				r := callHook(t, env, method, base+path, "approved")
				require.Equal(t, http.StatusNotFound, r.Status, "%s %s: %s", method, path, r.Body)
				bodies = append(bodies, string(r.Body))
			}
		}
		for _, b := range bodies {
			require.Equal(t, bodies[0], b, "one uniform 404 body")
		}
		// Nothing was resolved: both waiters still wait, the run got no delivery.
		for _, ev := range []string{"evt_approve", eventID} {
			r := env.call(t, http.MethodGet, "/v2/waiters/"+ev, nil)
			require.Equal(t, http.StatusOK, r.Status)
			require.Len(t, decodeJSON[[]wire.Waiter](t, r), 1, "waiter of %s", ev)
		}
		require.Len(t, ep.waitN(t, 2, func(q recorded) bool { return q.Header.Get("Upstash-Workflow-Runid") == runID }), 2)
	})
}

func TestWebhookRouteIsRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	env := newAPI(t, envOptions{config: func(c *Config) {
		c.Now = clock
		c.HookRate, c.HookBurst = 1, 5
	}})
	call := func() *http.Response {
		req, err := http.NewRequest(http.MethodPost, env.URL+"/v2/workflows/hooks/"+testProject+"/wfr_x/evt_x.secret", strings.NewReader("x"))
		require.NoError(t, err)
		resp, err := env.client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range 5 {
		require.Equal(t, http.StatusNotFound, call().StatusCode, "call %d is within the burst", i)
	}
	resp := call()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	require.Equal(t, http.StatusNotFound, call().StatusCode, "one call per second refills")
	require.Equal(t, http.StatusTooManyRequests, call().StatusCode)
}

func TestCreateWebhookStepMustNameItsRun(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)
	const runID = "wfr_hook_bad"
	wfURL := ep.URL("/wf/bad")
	ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
	for _, step := range []string{
		createWebhookStep(t, env.URL, testProject, "wfr_other", "evt_x", 1), // another run's URL
		createWebhookStep(t, env.URL, testProject, runID, "evt.x", 1),       // '.' separates the secret
		`{"stepId":1,"stepName":"h","stepType":"CreateWebhook","concurrent":1,"out":"not json"}`,
	} {
		r := env.batchWF(t, wfEntry(runID, wfURL, false, step))
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", step, r.Body)
		require.Contains(t, r.errorMessage(t), "CreateWebhook")
	}
}

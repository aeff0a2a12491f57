package server

// Real-HTTP tests of early outcomes (delivery/early.go): when the official SDKs publish a
// step or end the run from the run's only delivery in flight, that delivery's outcome is
// written in the same transaction, before its answer comes.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk/wire"
)

// loggedStates counts msgID's log events in state, from an endpoint's handler (no test
// assertions there).
func loggedStates(env *apiEnv, msgID, state string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, env.URL+"/v2/logs?messageIds="+url.QueryEscape(msgID)+"&state="+state, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+env.Token)
	resp, err := env.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /v2/logs: %d", resp.StatusCode)
	}
	var page wire.LogsPage
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return 0, err
	}
	return len(page.Events), nil
}

// TestEarlyOutcomeWithStepPublish: a delivery that publishes its step through the API is
// logged DELIVERED by the time the publish returns, and its answer, even a 500, neither
// changes that nor sends it again.
func TestEarlyOutcomeWithStepPublish(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	const runID = "wfr_early_step"
	var firstDeliveries, secondDeliveries atomic.Int32
	seen := make(chan error, 1)      // the first delivery's check, before it answered
	var deliveredBefore atomic.Int32 // its DELIVERED events then
	ep := scriptedEndpoint(t, func(r *http.Request, d delivered) scriptedAnswer {
		wfURL := r.Header.Get(wire.HeaderWorkflowURL)
		if d.History == 1 {
			firstDeliveries.Add(1)
			err := publishStep(env, wfEntry(runID, wfURL, false, runStepJSON(1)))
			if err == nil {
				var n int
				n, err = loggedStates(env, r.Header.Get(wire.HeaderMessageID), "DELIVERED")
				deliveredBefore.Store(int32(n))
			}
			seen <- err
			return scriptedAnswer{status: http.StatusInternalServerError, body: []byte("answered after the publish")}
		}
		secondDeliveries.Add(1)
		return scriptedAnswer{}
	})
	msgID := env.trigger(t, runID, ep.URL+"/wf", `"p"`, "upstash-retry-delay", "0")
	require.NoError(t, <-seen)
	require.Equal(t, int32(1), deliveredBefore.Load(), "DELIVERED is logged before the delivery answers")
	eventually(t, "s1 is delivered and every delivery finished", func() bool {
		return secondDeliveries.Load() == 1 && env.Engine.Stats().InFlight == 0
	})
	require.Equal(t, int32(1), firstDeliveries.Load(), "the 500 after the publish sends nothing again")
	require.Len(t, env.logs(t, "messageIds="+msgID+"&state=ERROR").Events, 0)
	require.Len(t, env.logs(t, "messageIds="+msgID+"&state=DELIVERED").Events, 1)
	require.Equal(t, []string{"Initial", "s1"}, stepNames(env.runLog(t, runID)))
}

// TestEarlyOutcomeWithRunEnd: a delivery that ends its run through the API (as the
// official SDKs do) is logged DELIVERED in the run's end.
func TestEarlyOutcomeWithRunEnd(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	const runID = "wfr_early_end"
	seen := make(chan error, 1)
	var deliveredBefore atomic.Int32
	ep := scriptedEndpoint(t, func(r *http.Request, d delivered) scriptedAnswer {
		req, err := http.NewRequest(http.MethodDelete, env.URL+"/v2/workflows/runs/"+runID+"?cancel=false", nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+env.Token)
			var resp *http.Response
			if resp, err = env.client.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("DELETE run: %d", resp.StatusCode)
				}
			}
		}
		if err == nil {
			var n int
			n, err = loggedStates(env, r.Header.Get(wire.HeaderMessageID), "DELIVERED")
			deliveredBefore.Store(int32(n))
		}
		seen <- err
		return scriptedAnswer{}
	})
	msgID := env.trigger(t, runID, ep.URL+"/wf", `"p"`)
	require.NoError(t, <-seen)
	require.Equal(t, int32(1), deliveredBefore.Load(), "DELIVERED is logged with the run's end")
	env.eventuallyRunState(t, runID, "RUN_SUCCESS")
	eventually(t, "the delivery finished", func() bool { return env.Engine.Stats().InFlight == 0 })
	require.Len(t, env.logs(t, "messageIds="+msgID+"&state=DELIVERED").Events, 1)
}

// TestEarlyOutcomeWaitsForCallbackAnswer: a delivery with a callback is recorded from its
// answer, even when it publishes a step first: the callback reports that answer.
func TestEarlyOutcomeWaitsForCallbackAnswer(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	const runID = "wfr_early_callback"
	callbacks := make(chan wire.CallbackPayload, 4)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p wire.CallbackPayload
		if err := json.NewDecoder(r.Body).Decode(&p); err == nil {
			callbacks <- p
		}
	}))
	t.Cleanup(cb.Close)
	ep := scriptedEndpoint(t, func(r *http.Request, d delivered) scriptedAnswer {
		if d.History == 1 {
			if err := publishStep(env, wfEntry(runID, r.Header.Get(wire.HeaderWorkflowURL), false, runStepJSON(1))); err != nil {
				return scriptedAnswer{status: http.StatusInternalServerError, body: []byte(err.Error())}
			}
			return scriptedAnswer{body: []byte("the answer")}
		}
		return scriptedAnswer{}
	})
	env.trigger(t, runID, ep.URL+"/wf", `"p"`, "upstash-callback", cb.URL)
	select {
	case p := <-callbacks:
		body, err := base64.StdEncoding.DecodeString(p.Body)
		require.NoError(t, err)
		require.Equal(t, "the answer", string(body), "the callback carries the delivery's own answer")
	case <-time.After(waitTimeout):
		t.Fatal("no callback")
	}
}

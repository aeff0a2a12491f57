package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// A notify wakes at most MaxNotifyWaiters waiters of its event. When more wait, the
// answer (still the SDKs' array) says so in Duraton-Notify-Partial, and the next notify
// wakes the rest; an answer that woke everyone has no such header.
func TestNotifySaysWhenItWokeOnlyPart(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.MaxNotifyWaiters = 2 }})
	ep := newSDKEndpoint(t)
	for i := range 3 {
		runID := fmt.Sprintf("wfr_many%d", i)
		wfURL := ep.URL("/wf/many")
		ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
		r := env.call(t, http.MethodPost, "/v2/wait/evt_many", waitBody(wfURL, `"1h"`, "w"), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}

	r := env.call(t, http.MethodPost, "/v2/notify/evt_many", []byte("x"), "Content-Type", "text/plain")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Len(t, decodeJSON[[]wire.NotifyResult](t, r), 2)
	require.Equal(t, "true", r.Header.Get(wire.HeaderNotifyPartial), "one waiter was left waiting")

	r = env.call(t, http.MethodPost, "/v2/notify/evt_many", []byte("x"), "Content-Type", "text/plain")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Len(t, decodeJSON[[]wire.NotifyResult](t, r), 1)
	require.Empty(t, r.Header.Get(wire.HeaderNotifyPartial), "every waiter was woken")
}

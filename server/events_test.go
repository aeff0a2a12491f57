package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Events notified for a run that does not wait for them yet are kept (lookback) within a
// per-run count and size (issue 14, finding 2): beyond them the notify answers 412.
func TestLookbackEventsAreCappedPerRun(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)

	const runID = "wfr_lookback_cap"
	ep.waitMessage(t, env.trigger(t, runID, ep.URL("/wf/cap"), "start"))
	for i := range 100 {
		r := env.call(t, http.MethodPost, fmt.Sprintf("/v2/notify/%s/evt_%d", runID, i), []byte("x"), "Content-Type", "text/plain")
		require.Equal(t, http.StatusOK, r.Status, "event %d: %s", i, r.Body)
	}
	r := env.call(t, http.MethodPost, "/v2/notify/"+runID+"/evt_100", []byte("x"), "Content-Type", "text/plain")
	require.Equal(t, http.StatusPreconditionFailed, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "limit is 100")

	// Size: 1 MiB per run in all.
	const runID2 = "wfr_lookback_bytes"
	ep.waitMessage(t, env.trigger(t, runID2, ep.URL("/wf/cap2"), "start"))
	big := []byte(strings.Repeat("b", 600<<10))
	r = env.call(t, http.MethodPost, "/v2/notify/"+runID2+"/evt_a", big, "Content-Type", "text/plain")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodPost, "/v2/notify/"+runID2+"/evt_b", big, "Content-Type", "text/plain")
	require.Equal(t, http.StatusPreconditionFailed, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "bytes")
}

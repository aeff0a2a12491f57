package server

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
)

// outcome is the one outcome of an event for its (single) workflow.
func outcome(t *testing.T, res []eventResult) string {
	t.Helper()
	require.Len(t, res, 1)
	require.Len(t, res[0].Runs, 1)
	r := res[0].Runs[0]
	set := map[string]bool{"run": r.RunID != "", "dropped": r.Dropped, "deduped": r.Deduped,
		"skipped": r.Skipped, "debounced": r.Debounced, "batched": r.Batched}
	var one []string
	for k, v := range set {
		if v {
			one = append(one, k)
		}
	}
	if len(one) == 1 && (r.HolderRunID != "") == (one[0] == "skipped") {
		return one[0]
	}
	t.Fatalf("not exactly one outcome: %+v", r)
	return ""
}

func gateEnv(t *testing.T, controls string) (*apiEnv, *testClock) {
	t.Helper()
	clock := newTestClock()
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.Now = clock.Now }})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"event": "e"}], %s}]}`,
		env.Endpoint.URL("/wf"), controls))
	return env, clock
}

func (e *apiEnv) event(t *testing.T, data string) string {
	t.Helper()
	return outcome(t, e.sendEvents(t, fmt.Sprintf(`{"name": "e", "data": %s}`, data)))
}

// TestNativeRateLimit: GCRA with burst = limit per key, then one every perMs/limit;
// an event over the limit is dropped (no run id), recorded as such on the event.
func TestNativeRateLimit(t *testing.T) {
	t.Parallel()
	env, clock := gateEnv(t, `"rateLimit": {"limit": 2, "perMs": 60000, "key": "user"}`)
	require.Equal(t, "run", env.event(t, `{"user": "a"}`))
	require.Equal(t, "run", env.event(t, `{"user": "a"}`))
	res := env.sendEvents(t, `{"name": "e", "data": {"user": "a"}}`)
	require.Equal(t, "dropped", outcome(t, res))
	stored := decodeJSON[struct{ Runs []eventRun }](t, env.call(t, http.MethodGet, "/events/"+res[0].ID, nil))
	require.Equal(t, []eventRun{{Workflow: "wf", Dropped: true}}, stored.Runs, "the event records that it was dropped")

	// Keys are compared with their type; other values have their own scope.
	require.Equal(t, "run", env.event(t, `{"user": "b"}`))
	require.Equal(t, "run", env.event(t, `{"user": 1}`))
	require.Equal(t, "run", env.event(t, `{"user": "1"}`))
	require.Equal(t, "run", env.event(t, `{"user": "null"}`))
	// Missing, null and non-scalar values share the whole-workflow scope.
	require.Equal(t, "run", env.event(t, `{}`))
	require.Equal(t, "run", env.event(t, `{"user": null}`))
	require.Equal(t, "dropped", env.event(t, `{"user": {"id": 1}}`))
	require.Equal(t, "dropped", env.event(t, `"not an object"`))

	// One start every 30 s after the burst.
	clock.Advance(30*time.Second - time.Millisecond)
	require.Equal(t, "dropped", env.event(t, `{"user": "a"}`))
	clock.Advance(time.Millisecond)
	require.Equal(t, "run", env.event(t, `{"user": "a"}`))
	require.Equal(t, "dropped", env.event(t, `{"user": "a"}`))
	// Idle for a whole period: the full burst is back.
	clock.Advance(90 * time.Second)
	require.Equal(t, "run", env.event(t, `{"user": "a"}`))
	require.Equal(t, "run", env.event(t, `{"user": "a"}`))
	require.Equal(t, "dropped", env.event(t, `{"user": "a"}`))
}

// TestNativeIdempotency: one run per key value per window, anchored at the first
// accepted event; duplicates do not extend it.
func TestNativeIdempotency(t *testing.T) {
	t.Parallel()
	env, clock := gateEnv(t, `"idempotency": {"key": "order.id", "periodMs": 60000}`)
	require.Equal(t, "run", env.event(t, `{"order": {"id": 1}}`))
	require.Equal(t, "deduped", env.event(t, `{"order": {"id": 1}}`))
	require.Equal(t, "run", env.event(t, `{"order": {"id": 2}}`))
	clock.Advance(59*time.Second + 999*time.Millisecond)
	require.Equal(t, "deduped", env.event(t, `{"order": {"id": 1}}`), "a duplicate late in the window")
	clock.Advance(time.Millisecond)
	require.Equal(t, "run", env.event(t, `{"order": {"id": 1}}`), "the window ends 60 s after the first event, duplicates did not extend it")
	require.Equal(t, "deduped", env.event(t, `{"order": {"id": 1}}`))
	// Without the key, events share the whole-workflow scope.
	require.Equal(t, "run", env.event(t, `{}`))
	require.Equal(t, "deduped", env.event(t, `{"order": null}`))

	// The default window is 24 h.
	env2, clock2 := gateEnv(t, `"idempotency": {}`)
	require.Equal(t, "run", env2.event(t, `1`))
	clock2.Advance(24*time.Hour - time.Millisecond)
	require.Equal(t, "deduped", env2.event(t, `2`))
	clock2.Advance(time.Millisecond)
	require.Equal(t, "run", env2.event(t, `3`))
}

// TestNativeGateOrder: idempotency is checked before rateLimit, and admission is
// two-phase: a duplicate consumes no rate, and an event that rateLimit drops does not
// anchor an idempotency window.
func TestNativeGateOrder(t *testing.T) {
	t.Parallel()
	env, clock := gateEnv(t, `"idempotency": {"key": "order"}, "rateLimit": {"limit": 2, "perMs": 60000}`)
	require.Equal(t, "run", env.event(t, `{"order": 1}`))
	require.Equal(t, "deduped", env.event(t, `{"order": 1}`))
	require.Equal(t, "run", env.event(t, `{"order": 2}`), "the duplicate consumed no rate")
	require.Equal(t, "dropped", env.event(t, `{"order": 3}`))
	clock.Advance(30 * time.Second)
	require.Equal(t, "run", env.event(t, `{"order": 3}`), "the dropped event did not anchor a window")
	require.Equal(t, "deduped", env.event(t, `{"order": 3}`))
}

// TestNativeGatesPerWorkflow: each matching workflow has its own gates; the answer has
// one outcome per workflow, and a dedupeId stops the event before any of them.
func TestNativeGatesPerWorkflow(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	url := env.Endpoint.URL("/wf")
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [
		{"name": "limited", "url": %q, "triggers": [{"event": "e"}], "rateLimit": {"limit": 1, "perMs": 3600000}},
		{"name": "once", "url": %q, "triggers": [{"event": "e"}], "idempotency": {}},
		{"name": "free", "url": %q, "triggers": [{"event": "e"}]}]}`, url, url, url))
	res := env.sendEvents(t, `[{"name": "e"}, {"name": "e"}, {"name": "e", "dedupeId": "d"}, {"name": "e", "dedupeId": "d"}]`)
	require.Len(t, res, 4)
	require.NotEmpty(t, res[0].Runs[0].RunID)
	require.NotEmpty(t, res[0].Runs[1].RunID)
	require.NotEmpty(t, res[0].Runs[2].RunID)
	require.Equal(t, []string{"free", "limited", "once"}, []string{res[0].Runs[0].Workflow, res[0].Runs[1].Workflow, res[0].Runs[2].Workflow})
	require.NotEmpty(t, res[1].Runs[0].RunID, "free")
	require.Equal(t, eventRun{Workflow: "limited", Dropped: true}, res[1].Runs[1])
	require.Equal(t, eventRun{Workflow: "once", Deduped: true}, res[1].Runs[2])
	require.Len(t, res[2].Runs, 3)
	require.Equal(t, eventResult{ID: res[2].ID, Deduped: true, Runs: []eventRun{}}, res[3])
}

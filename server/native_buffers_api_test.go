package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/deliverytest"
)

// runPayload is a native run's initial payload (docs/protocol.md, "Native workflows"),
// reduced to what the tests compare.
type runPayload struct {
	ID     string          `json:"id"`
	Data   json.RawMessage `json:"data"`
	Events []struct {
		ID   string          `json:"id"`
		Data json.RawMessage `json:"data"`
	} `json:"events"`
}

// holdEnv is gateEnv with a workflow endpoint that acknowledges its first delivery as an
// SDK does without finishing the run, so runs stay live (singleton holders).
func holdEnv(t *testing.T, controls string) (*apiEnv, *testClock, *deliverytest.Endpoint) {
	t.Helper()
	ep := deliverytest.NewEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		return http.StatusOK, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, "{}"
	})
	clock := newTestClock()
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.Now = clock.Now }})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"event": "e"}], %s}]}`,
		ep.URL("/wf"), controls))
	return env, clock, ep
}

// flush fires the debounce and batch deadlines due at the engine's clock.
func (e *apiEnv) flush(t *testing.T) {
	t.Helper()
	_, err := e.native.FlushDue(t.Context())
	require.NoError(t, err)
}

// nativeRuns lists the project's runs oldest first with their initial payloads.
func (e *apiEnv) nativeRuns(t *testing.T) ([]delivery.RunWithHistory, []runPayload) {
	t.Helper()
	runs, _, err := e.Engine.Runs(t.Context(), testProject, nil, 1000, func(*delivery.Run) bool { return true })
	require.NoError(t, err)
	sort.Slice(runs, func(i, j int) bool {
		return runs[i].CreatedAt < runs[j].CreatedAt || runs[i].CreatedAt == runs[j].CreatedAt && runs[i].ID < runs[j].ID
	})
	out := make([]runPayload, len(runs))
	for i, r := range runs {
		require.NotEmpty(t, r.History, "run %s has its initial payload", r.ID)
		require.NoError(t, json.Unmarshal(r.History[0].Body, &out[i]), "%s", r.History[0].Body)
	}
	return runs, out
}

// datas are the data of a payload's events, compact.
func datas(p runPayload) []string {
	out := make([]string, len(p.Events))
	for i, e := range p.Events {
		out[i] = string(e.Data)
	}
	return out
}

// TestNativeDebounce: one run periodMs after the last event of a burst, carrying the last
// event; each event slides the deadline; keys debounce independently; timeoutMs caps the
// wait at timeoutMs after the burst's first event.
func TestNativeDebounce(t *testing.T) {
	t.Parallel()
	env, clock, ep := holdEnv(t, `"debounce": {"periodMs": 5000, "key": "doc", "timeoutMs": 12000}`)
	require.Equal(t, "debounced", env.event(t, `{"doc":"a","n":1}`))
	require.Equal(t, "debounced", env.event(t, `{"doc":"b","n":1}`))
	clock.Advance(4 * time.Second)
	require.Equal(t, "debounced", env.event(t, `{"doc":"a","n":2}`)) // slides a to 9 s
	clock.Advance(time.Second - time.Millisecond)
	env.flush(t)
	runs, _ := env.nativeRuns(t)
	require.Empty(t, runs, "nothing is due before 5 s")
	clock.Advance(time.Millisecond) // 5 s: b is due, a was slid
	env.flush(t)
	runs, pl := env.nativeRuns(t)
	require.Len(t, runs, 1)
	require.Equal(t, []string{`{"doc":"b","n":1}`}, datas(pl[0]))

	// a's burst goes on: events at 8 s and 11.999 s slide, but 12 s after its first
	// event (timeoutMs) it fires with the last event.
	clock.Advance(3 * time.Second)
	require.Equal(t, "debounced", env.event(t, `{"doc":"a","n":3}`))
	clock.Advance(4*time.Second - time.Millisecond)
	env.flush(t)
	require.Equal(t, "debounced", env.event(t, `{"doc":"a","n":4}`))
	env.flush(t)
	runs, _ = env.nativeRuns(t)
	require.Len(t, runs, 1, "a's deadline is its timeoutMs cap, not yet reached")
	clock.Advance(time.Millisecond)
	env.flush(t)
	runs, pl = env.nativeRuns(t)
	require.Len(t, runs, 2)
	require.Equal(t, `{"doc":"a","n":4}`, string(pl[1].Data), "the last event is the top level")
	require.Equal(t, []string{`{"doc":"a","n":4}`}, datas(pl[1]))

	// The next event of a starts a new burst; firing twice starts one run.
	require.Equal(t, "debounced", env.event(t, `{"doc":"a","n":5}`))
	clock.Advance(5 * time.Second)
	env.flush(t)
	env.flush(t)
	runs, pl = env.nativeRuns(t)
	require.Len(t, runs, 3)
	require.Equal(t, []string{`{"doc":"a","n":5}`}, datas(pl[2]))
	// The run is delivered to the workflow with the last event.
	got := ep.Requests.Wait(t, waitTimeout, 3, func(q recorded) bool { return q.Path == "/wf" })
	require.Len(t, got, 3)
}

// TestNativeBatch: one run per maxSize events (started by the event that fills the
// batch) or timeoutMs after the first, whichever first; events in receive order, the
// first at the top level; keys batch separately.
func TestNativeBatch(t *testing.T) {
	t.Parallel()
	env, clock, ep := holdEnv(t, `"batch": {"maxSize": 3, "timeoutMs": 5000, "key": "idx"}`)
	require.Equal(t, "batched", env.event(t, `{"idx":"a","n":1}`))
	require.Equal(t, "batched", env.event(t, `{"idx":"b","n":1}`))
	clock.Advance(time.Second)
	require.Equal(t, "batched", env.event(t, `{"idx":"a","n":2}`))
	runs, _ := env.nativeRuns(t)
	require.Empty(t, runs)
	require.Equal(t, "batched", env.event(t, `{"idx":"a","n":3}`)) // full: the run starts now
	runs, pl := env.nativeRuns(t)
	require.Len(t, runs, 1)
	require.Equal(t, []string{`{"idx":"a","n":1}`, `{"idx":"a","n":2}`, `{"idx":"a","n":3}`}, datas(pl[0]))
	require.Equal(t, `{"idx":"a","n":1}`, string(pl[0].Data), "the first event is the top level")
	require.Equal(t, pl[0].Events[0].ID, pl[0].ID)

	// b times out 5 s after its first event, not after its last.
	clock.Advance(3 * time.Second)
	require.Equal(t, "batched", env.event(t, `{"idx":"b","n":2}`))
	clock.Advance(time.Second - time.Millisecond)
	env.flush(t)
	runs, _ = env.nativeRuns(t)
	require.Len(t, runs, 1)
	clock.Advance(time.Millisecond)
	env.flush(t)
	env.flush(t)
	runs, pl = env.nativeRuns(t)
	require.Len(t, runs, 2)
	require.Equal(t, []string{`{"idx":"b","n":1}`, `{"idx":"b","n":2}`}, datas(pl[1]))
	ep.Requests.Wait(t, waitTimeout, 2, func(q recorded) bool { return q.Path == "/wf" })

	// A full batch leaves no buffer behind: nothing more fires.
	clock.Advance(time.Hour)
	env.flush(t)
	runs, _ = env.nativeRuns(t)
	require.Len(t, runs, 2)
}

// TestNativeBufferOfRemovedWorkflow: removing a workflow drops its buffered events; they
// start nothing, also when a workflow of that name is registered again.
func TestNativeBufferOfRemovedWorkflow(t *testing.T) {
	t.Parallel()
	env, clock := gateEnv(t, `"batch": {"maxSize": 3, "timeoutMs": 5000}`)
	require.Equal(t, "batched", env.event(t, `1`))
	env.mustPutApp(t, "app", `{"workflows": []}`)
	clock.Advance(time.Minute)
	env.flush(t)
	runs, _ := env.nativeRuns(t)
	require.Empty(t, runs)
	// Registered again under the same name, the workflow starts with an empty buffer.
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"event": "e"}], "batch": {"maxSize": 2, "timeoutMs": 5000}}]}`,
		env.Endpoint.URL("/wf")))
	require.Equal(t, "batched", env.event(t, `2`))
	runs, _ = env.nativeRuns(t)
	require.Empty(t, runs, "the old event is not in the new batch")
	require.Equal(t, "batched", env.event(t, `3`))
	_, pl := env.nativeRuns(t)
	require.Len(t, pl, 1)
	require.Equal(t, []string{`2`, `3`}, datas(pl[0]))
}

// TestNativeSingletonSkip: while a run of the key is live, a new trigger is skipped and
// answers the holder; other keys are free; once the holder ended, the key is free.
func TestNativeSingletonSkip(t *testing.T) {
	t.Parallel()
	env, _, _ := holdEnv(t, `"singleton": {"key": "acct", "mode": "skip"}`)
	first := env.sendEvents(t, `{"name": "e", "data": {"acct": "a"}}`)[0].Runs[0]
	require.NotEmpty(t, first.RunID)
	res := env.sendEvents(t, `{"name": "e", "data": {"acct": "a"}}`)
	require.Equal(t, "skipped", outcome(t, res))
	require.Equal(t, first.RunID, res[0].Runs[0].HolderRunID)
	require.Equal(t, "run", env.event(t, `{"acct": "b"}`))
	require.Equal(t, "run", env.event(t, `{}`), "the whole-workflow scope is its own key")
	require.Equal(t, "skipped", env.event(t, `{"acct": null}`))

	live, err := env.Engine.CancelRun(t.Context(), testProject, first.RunID)
	require.NoError(t, err)
	require.True(t, live)
	next := env.sendEvents(t, `{"name": "e", "data": {"acct": "a"}}`)[0].Runs[0]
	require.NotEmpty(t, next.RunID)
	res = env.sendEvents(t, `{"name": "e", "data": {"acct": "a"}}`)
	require.Equal(t, next.RunID, res[0].Runs[0].HolderRunID)
}

// TestNativeSingletonCancel: a new trigger cancels the key's live run and starts its own
// in the same transaction.
func TestNativeSingletonCancel(t *testing.T) {
	t.Parallel()
	env, _, _ := holdEnv(t, `"singleton": {"key": "acct"}`)
	first := env.sendEvents(t, `{"name": "e", "data": {"acct": "a"}}`)[0].Runs[0]
	other := env.sendEvents(t, `{"name": "e", "data": {"acct": "b"}}`)[0].Runs[0]
	second := env.sendEvents(t, `{"name": "e", "data": {"acct": "a"}}`)[0].Runs[0]
	require.NotEmpty(t, second.RunID)
	require.NotEqual(t, first.RunID, second.RunID)
	state := func(id string) string {
		r, err := env.Engine.Run(t.Context(), testProject, id)
		require.NoError(t, err)
		return r.State
	}
	require.Equal(t, delivery.RunCanceled, state(first.RunID))
	require.Equal(t, delivery.RunStarted, state(second.RunID))
	require.Equal(t, delivery.RunStarted, state(other.RunID), "another key's run is untouched")
}

// TestNativeDebounceWithSingleton: the run a debounce fires passes the singleton gate.
func TestNativeDebounceWithSingleton(t *testing.T) {
	t.Parallel()
	env, clock, _ := holdEnv(t, `"debounce": {"periodMs": 1000}, "singleton": {"mode": "skip"}`)
	require.Equal(t, "debounced", env.event(t, `1`))
	clock.Advance(time.Second)
	env.flush(t)
	require.Equal(t, "debounced", env.event(t, `2`))
	clock.Advance(time.Second)
	env.flush(t)
	runs, pl := env.nativeRuns(t)
	require.Len(t, runs, 1, "the second burst is skipped: the first run is live")
	require.Equal(t, []string{`1`}, datas(pl[0]))
}

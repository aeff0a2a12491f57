package server

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/sdk/wire"
)

// woke records what each run's wait resumed with.
type woke struct {
	mu   sync.Mutex
	data map[string]string // run id → the event data the wait returned ("timeout")
}

func (w *woke) put(run, v string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.data[run] = v
}

func (w *woke) get(run string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.data[run]
	return v, ok
}

// waitingWorkflow mounts a Go SDK workflow that waits for order.paid with wait, then
// records what it got.
func waitingWorkflow(t *testing.T, env *apiEnv, path string, wait sdk.Wait, got *woke) string {
	app := newSDKApp(t, env)
	return app.mount(path, func(c *sdk.Context) (any, error) {
		res, err := sdk.WaitForEvent(c, "paid", wait)
		if err != nil {
			return nil, err
		}
		return sdk.Run(c, "record", func() (string, error) {
			v := string(res.Data)
			if res.Timeout {
				v = "timeout"
			}
			got.put(c.RunID, v)
			return v, nil
		})
	})
}

// placeOrders sends one order.placed per data and returns the run of each, once every
// run waits.
func placeOrders(t *testing.T, env *apiEnv, data ...string) []string {
	var runs []string
	for _, d := range data {
		res := env.sendEvents(t, fmt.Sprintf(`{"name": "order.placed", "data": %s}`, d))[0]
		require.Len(t, res.Runs, 1)
		runs = append(runs, res.Runs[0].RunID)
	}
	for _, id := range runs {
		env.eventuallyRunStatus(t, id, "waiting")
	}
	return runs
}

// TestNativeWaitMatchWakesOnlyItsRun: two runs wait for order.paid matched on
// data.orderId, for o1 and o2; one order.paid for o1 wakes exactly o1's run (before,
// it woke both and o2's run resumed with o1's data); o2's event then wakes o2's.
func TestNativeWaitMatchWakesOnlyItsRun(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	got := &woke{data: map[string]string{}}
	url := waitingWorkflow(t, env, "/fulfil", sdk.Wait{Event: "order.paid", Timeout: time.Hour, Match: "data.orderId"}, got)
	env.mustPutApp(t, "shop", fmt.Sprintf(`{"workflows": [{"name": "fulfil", "url": %q, "triggers": [{"event": "order.placed"}]}]}`, url))
	runs := placeOrders(t, env, `{"orderId": "o1"}`, `{"orderId": "o2"}`)

	env.sendEvents(t, `{"name": "order.paid", "data": {"orderId": "o1", "amount": 10}}`)
	env.eventuallyRunStatus(t, runs[0], "succeeded")
	v, _ := got.get(runs[0])
	require.JSONEq(t, `{"orderId": "o1", "amount": 10}`, v)
	require.Equal(t, "waiting", env.nativeRun(t, runs[1]).Status, "o2's run does not wake for o1")
	_, woken := got.get(runs[1])
	require.False(t, woken)

	env.sendEvents(t, `{"name": "order.paid", "data": {"orderId": "o3"}}`) // nobody's
	env.sendEvents(t, `{"name": "order.paid", "data": {"orderId": "o2"}}`)
	env.eventuallyRunStatus(t, runs[1], "succeeded")
	v, _ = got.get(runs[1])
	require.JSONEq(t, `{"orderId": "o2"}`, v)
}

// TestNativeWaitIfWithNumbers: an `if` condition compares numbers of both events
// (ints and doubles alike); an event for which it is false wakes nothing, and one
// without the field (an evaluation error) neither.
func TestNativeWaitIfWithNumbers(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	got := &woke{data: map[string]string{}}
	url := waitingWorkflow(t, env, "/big", sdk.Wait{Event: "order.paid", Timeout: time.Hour,
		If: "async.data.orderId == event.data.orderId && async.data.amount >= event.data.min"}, got)
	env.mustPutApp(t, "shop", fmt.Sprintf(`{"workflows": [{"name": "big", "url": %q, "triggers": [{"event": "order.placed"}]}]}`, url))
	runs := placeOrders(t, env, `{"orderId": "o1", "min": 100}`, `{"orderId": "o2", "min": 99.5}`)

	env.sendEvents(t, `[{"name": "order.paid", "data": {"orderId": "o1", "amount": 99.9}},
		{"name": "order.paid", "data": {"orderId": "o1"}},
		{"name": "order.paid", "data": {"orderId": "o2", "amount": 99}}]`)
	env.sendEvents(t, `{"name": "order.paid", "data": {"orderId": "o2", "amount": 99.5}}`)
	env.eventuallyRunStatus(t, runs[1], "succeeded")
	v, _ := got.get(runs[1])
	require.JSONEq(t, `{"orderId": "o2", "amount": 99.5}`, v)
	require.Equal(t, "waiting", env.nativeRun(t, runs[0]).Status, "99.9 < 100, and no amount, wake nothing")

	env.sendEvents(t, `{"name": "order.paid", "data": {"orderId": "o1", "amount": 100}}`)
	env.eventuallyRunStatus(t, runs[0], "succeeded")
	v, _ = got.get(runs[0])
	require.JSONEq(t, `{"orderId": "o1", "amount": 100}`, v)
}

// TestWaitConditionOnTheWire: a bad Duraton-Wait-If is a 400 naming the expression and
// registers nothing; a good one is stored with the waiter (listed), and /v2/notify wakes
// only waiters whose condition holds for its data, plain waiters as before.
func TestWaitConditionOnTheWire(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)
	wfURL := ep.URL("/wf/cond")
	wait := func(runID, cond string) apiResponse {
		h := waitHeaders(runID, wfURL)
		if cond != "" {
			h = append(h, wire.HeaderWaitIf, cond)
		}
		return env.call(t, http.MethodPost, "/v2/wait/evt_cond", waitBody(wfURL, `"1h"`, "w"), h...)
	}
	for i, payload := range []string{`{"orderId":"o1"}`, `{"orderId":"o2"}`, `{"orderId":"o3"}`} {
		ep.waitMessage(t, env.trigger(t, fmt.Sprintf("wfr_cond%d", i), wfURL, payload))
	}
	for cond, want := range map[string]string{
		"async.data.orderId ==":   `invalid wait condition: Duraton-Wait-If: expression \"async.data.orderId ==\": ERROR: \u003cinput\u003e:1:22: Syntax error`,
		"order.id == 1":           "undeclared reference to 'order'",
		`1 + "a" == async.data.x`: "found no matching overload",
		`async.data.orderId + 1`:  "a condition must be a bool, the expression is a int",
		`"yes"`:                   "the expression is a string",
	} {
		r := wait("wfr_cond0", cond)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", cond, r.Body)
		require.Contains(t, string(r.Body), want, cond)
	}
	r := env.call(t, http.MethodGet, "/v2/waiters/evt_cond", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Empty(t, decodeJSON[[]wire.Waiter](t, r), "a refused wait registers nothing")

	require.Equal(t, http.StatusOK, wait("wfr_cond0", wire.WaitMatchIf("data.orderId")).Status)
	require.Equal(t, http.StatusOK, wait("wfr_cond1", `async.data.n > 2`).Status)
	require.Equal(t, http.StatusOK, wait("wfr_cond2", "").Status)
	r = env.call(t, http.MethodGet, "/v2/waiters/evt_cond", nil)
	require.Len(t, decodeJSON[[]wire.Waiter](t, r), 3)

	notify := func(data string) int {
		r := env.call(t, http.MethodPost, "/v2/notify/evt_cond", []byte(data), "Content-Type", "application/json")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return len(decodeJSON[[]wire.NotifyResult](t, r))
	}
	require.Equal(t, 1, notify(`{"orderId":"o9","n":1}`), "only the plain waiter")
	require.Equal(t, 0, notify(`{"orderId":"o9","n":1}`))
	require.Equal(t, 2, notify(`{"orderId":"o1","n":3}`), "the match and the if")
	r = env.call(t, http.MethodGet, "/v2/waiters/evt_cond", nil)
	require.Empty(t, decodeJSON[[]wire.Waiter](t, r))
}

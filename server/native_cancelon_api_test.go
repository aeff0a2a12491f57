package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

type cancelAnswer struct {
	Events []struct {
		ID        string
		Cancelled []struct {
			Workflow  string
			Cancelled []string
		}
	}
}

// TestNativeCancelOn: an order.cancelled for o1 cancels o1's queued (held by a
// throttle), sleeping and waiting runs of the workflows whose cancelOn matches it, in
// the commit that accepts it, lists them in its answer and marks each run cancelledBy
// the event; o2's runs, a workflow without cancelOn, an `if` that is false and a run
// older than the entry's timeoutMs are left alone. A later event whose `if` holds
// cancels that run too.
func TestNativeCancelOn(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	nap := app.mount("/nap", func(c *sdk.Context) (any, error) { return nil, c.Sleep("nap", time.Hour) })
	await := app.mount("/await", func(c *sdk.Context) (any, error) {
		_, err := c.WaitForEvent("paid", "order.paid", time.Hour)
		return nil, err
	})
	const byOrder = `"cancelOn": [{"event": "order.cancelled", "match": "data.orderId"}]`
	env.mustPutApp(t, "shop", fmt.Sprintf(`{"workflows": [
		{"name": "nap", "url": %q, "triggers": [{"event": "order.placed"}], %s},
		{"name": "await", "url": %q, "triggers": [{"event": "order.placed"}], %s},
		{"name": "paced", "url": %q, "triggers": [{"event": "order.placed"}], %s, "throttle": {"limit": 1, "perMs": 3600000}},
		{"name": "other", "url": %q, "triggers": [{"event": "order.placed"}]},
		{"name": "late", "url": %q, "triggers": [{"event": "order.placed"}],
		 "cancelOn": [{"event": "order.cancelled", "match": "data.orderId", "timeoutMs": 1}]},
		{"name": "cond", "url": %q, "triggers": [{"event": "order.placed"}],
		 "cancelOn": [{"event": "order.cancelled", "if": "async.data.orderId == event.data.orderId && async.data.refund > 10"}]}]}`,
		nap, byOrder, await, byOrder, nap, byOrder, nap, nap, nap))

	runs := map[string]string{} // workflow/order → run
	for _, order := range []string{"o2", "o1"} {
		res := env.sendEvents(t, fmt.Sprintf(`{"name": "order.placed", "data": {"orderId": %q}}`, order))[0]
		require.Len(t, res.Runs, 6)
		for _, r := range res.Runs {
			runs[r.Workflow+"/"+order] = r.RunID
		}
	}
	want := map[string]string{
		"nap/o1": "sleeping", "await/o1": "waiting", "paced/o1": "queued", "other/o1": "sleeping", "cond/o1": "sleeping", "late/o1": "sleeping",
		"nap/o2": "sleeping", "await/o2": "waiting", "paced/o2": "sleeping", "other/o2": "sleeping", "cond/o2": "sleeping", "late/o2": "sleeping",
	}
	for k, status := range want {
		env.eventuallyRunStatus(t, runs[k], status)
	}

	send := func(body string) cancelAnswer {
		r := env.call(t, http.MethodPost, "/events", []byte(body), "Content-Type", "application/json")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return decodeJSON[cancelAnswer](t, r)
	}
	ans := send(`{"name": "order.cancelled", "data": {"orderId": "o1", "refund": 5}}`)
	require.Len(t, ans.Events, 1)
	got := map[string][]string{}
	for _, c := range ans.Events[0].Cancelled {
		got[c.Workflow] = c.Cancelled
	}
	require.Equal(t, map[string][]string{
		"await": {runs["await/o1"]}, "nap": {runs["nap/o1"]}, "paced": {runs["paced/o1"]},
	}, got)
	for _, k := range []string{"nap/o1", "await/o1", "paced/o1"} {
		r := env.call(t, http.MethodGet, "/runs/"+runs[k], nil)
		var v struct {
			Status      string
			CancelledBy json.RawMessage
		}
		require.NoError(t, json.Unmarshal(r.Body, &v))
		require.Equal(t, "cancelled", v.Status, k)
		require.JSONEq(t, fmt.Sprintf(`{"eventId": %q}`, ans.Events[0].ID), string(v.CancelledBy), k)
		want[k] = "cancelled"
	}
	for k, status := range want {
		require.Equal(t, status, env.nativeRun(t, runs[k]).Status, k)
	}

	ans = send(`{"name": "order.cancelled", "data": {"orderId": "o1", "refund": 50}}`)
	require.Len(t, ans.Events[0].Cancelled, 1)
	require.Equal(t, "cond", ans.Events[0].Cancelled[0].Workflow)
	require.Equal(t, []string{runs["cond/o1"]}, ans.Events[0].Cancelled[0].Cancelled)
	want["cond/o1"] = "cancelled"
	for k, status := range want {
		require.Equal(t, status, env.nativeRun(t, runs[k]).Status, k)
	}
	// The event is kept with what it did.
	r := env.call(t, http.MethodGet, "/events/"+ans.Events[0].ID, nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, string(r.Body), runs["cond/o1"])
}

// TestNativeCancelOnRefusals: cancelOn is checked at registration, each error naming the
// workflow and the field.
func TestNativeCancelOnRefusals(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	nine := `[{"event": "a"}`
	for range 8 {
		nine += `, {"event": "a"}`
	}
	nine += `]`
	for _, c := range []struct{ body, want string }{
		{nine, `field "cancelOn": at most 8 entries, got 9`},
		{`[{"event": ""}]`, `field "cancelOn[0].event"`},
		{`[{"event": "x", "match": "data orderId"}]`, `field "cancelOn[0].match": want a dotted path`},
		{`[{"event": "x", "if": "async.data.a >"}]`, `field "cancelOn[0].if": expression "async.data.a >": ERROR: <input>:1:15: Syntax error`},
		{`[{"event": "x", "if": "order.id == 1"}]`, `undeclared reference to 'order'`},
		{`[{"event": "x", "timeoutMs": -1}]`, `field "cancelOn[0].timeoutMs"`},
		{`[{"event": "x", "after": 1}]`, `field "cancelOn[0].after": unknown field`},
	} {
		r := env.putApp(t, "bad", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": "http://127.0.0.1:9/x", "triggers": [{"event": "e"}], "cancelOn": %s}]}`, c.body))
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", c.body, r.Body)
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal(r.Body, &e))
		require.Contains(t, e.Error, c.want, c.body)
		require.Contains(t, e.Error, `workflow "wf"`)
	}
}

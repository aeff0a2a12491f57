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

// sleeper mounts a Go SDK workflow that sleeps for an hour: its runs stay live.
func sleeper(t *testing.T, env *apiEnv, path string) string {
	app := newSDKApp(t, env)
	return app.mount(path, func(c *sdk.Context) (any, error) {
		return nil, c.Sleep("nap", time.Hour)
	})
}

// TestNativeKeyExpressionsKeepKeysApart: `key: "event.data.orderId"` is an expression
// over the event, so o1 and o2 are two singleton scopes (as a path it named
// data.event.data.orderId, missing for both: one scope, o2 skipped); a composite key
// expression works as one; a key without a value is the empty key, shown on the run
// with the expression and why.
func TestNativeKeyExpressionsKeepKeysApart(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	url := sleeper(t, env, "/orders")
	env.mustPutApp(t, "shop", fmt.Sprintf(`{"workflows": [
		{"name": "per-order", "url": %q, "triggers": [{"event": "order.placed"}],
		 "singleton": {"key": "event.data.orderId", "mode": "skip"}},
		{"name": "per-region", "url": %q, "triggers": [{"event": "order.placed"}],
		 "concurrency": {"limit": 5, "key": "event.data.accountId + \"/\" + event.data.region"}}]}`, url, url))

	runOf := func(res eventResult, wf string) eventRun {
		for _, r := range res.Runs {
			if r.Workflow == wf {
				return r
			}
		}
		t.Fatalf("no run of %s in %+v", wf, res)
		return eventRun{}
	}
	o1 := env.sendEvents(t, `{"name": "order.placed", "data": {"orderId": "o1", "accountId": "a1", "region": "eu"}}`)[0]
	o2 := env.sendEvents(t, `{"name": "order.placed", "data": {"orderId": "o2", "accountId": "a1"}}`)[0]
	again := env.sendEvents(t, `{"name": "order.placed", "data": {"orderId": "o1"}}`)[0]
	r1, r2, r3 := runOf(o1, "per-order"), runOf(o2, "per-order"), runOf(again, "per-order")
	require.NotEmpty(t, r1.RunID)
	require.False(t, r2.Skipped, "o2 is another key than o1")
	require.NotEmpty(t, r2.RunID)
	require.NotEqual(t, r1.RunID, r2.RunID)
	require.True(t, r3.Skipped, "a second o1 is skipped while o1's run lives")
	require.Equal(t, r1.RunID, r3.HolderRunID)

	keys := func(id string) string {
		b, err := json.Marshal(env.nativeRun(t, id).Keys)
		require.NoError(t, err)
		return string(b)
	}
	require.JSONEq(t, `{"singleton": {"expr": "event.data.orderId", "scope": "key", "value": "o1"}}`, keys(r1.RunID))
	require.JSONEq(t, `{"concurrency": {"expr": "event.data.accountId + \"/\" + event.data.region", "scope": "key", "value": "a1/eu"}}`,
		keys(runOf(o1, "per-region").RunID))
	require.JSONEq(t, `{"concurrency": {"expr": "event.data.accountId + \"/\" + event.data.region", "scope": "workflow", "value": null,
		"error": "no such key: region"}}`, keys(runOf(o2, "per-region").RunID))
}

// TestNativeBadExpressionIsA400NamingIt: a syntax error, a type error and a root other
// than event are refused at registration with the workflow, the field and CEL's message;
// nothing is stored.
func TestNativeBadExpressionIsA400NamingIt(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	for _, c := range []struct{ field, body, want string }{
		{"concurrency", `"concurrency": {"limit": 1, "key": "event.data."}`, `workflow "wf" (workflows[0]): field "concurrency.key": expression "event.data.": ERROR: <input>:1:12: Syntax error`},
		{"throttle", `"throttle": {"limit": 1, "perMs": 1000, "key": "event.data.n + \"x\" + 1"}`, `field "throttle.key": expression "event.data.n + \"x\" + 1": ERROR: <input>:1:20: found no matching overload for '_+_' applied to '(string, int)'`},
		{"singleton", `"singleton": {"key": "order.id == 1"}`, `field "singleton.key": expression "order.id == 1": ERROR: <input>:1:1: undeclared reference to 'order'`},
		{"priority", `"priority": {"run": "event.data.vip ? 60 : "}`, `field "priority.run": expression "event.data.vip ? 60 : ": ERROR`},
		{"priority type", `"priority": {"run": "\"high\""}`, `field "priority.run": expression "\"high\"": want a number of seconds, the expression is a string`},
		{"priority both", `"priority": {"run": "1", "shiftMs": 5}`, `field "priority.run": give shiftMs or run, not both`},
	} {
		r := env.putApp(t, "bad", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": "http://127.0.0.1:9/x", "triggers": [{"event": "e"}], %s}]}`, c.body))
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", c.field, r.Body)
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal(r.Body, &e))
		require.Contains(t, e.Error, c.want, c.field)
	}
	r := env.call(t, http.MethodGet, "/apps/bad", nil)
	require.Equal(t, http.StatusNotFound, r.Status, "nothing was stored")
}

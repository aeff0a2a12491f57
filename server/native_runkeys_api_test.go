package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

// TestNativeRunKeys: GET /runs/{id} shows each keyed control's key as resolved when the
// run was created, the whole-workflow scope marked as such, and a later change of the
// definition does not rewrite it.
func TestNativeRunKeys(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	url := app.mount("/keyed", func(c *sdk.Context) (any, error) {
		return sdk.Run(c, "only", func() (int, error) { return 1, nil })
	})
	env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [
		{"name": "keyed", "url": %q, "triggers": [{"event": "go"}],
		 "concurrency": [{"limit": 5, "key": "account"}, {"limit": 50}],
		 "throttle": {"limit": 100, "perMs": 1000, "key": "user.id"},
		 "singleton": {"key": "n", "mode": "skip"},
		 "idempotency": {"key": "flag"},
		 "rateLimit": {"limit": 10, "perMs": 1000},
		 "priority": {"shiftMs": 1000}},
		{"name": "plain", "url": %q, "triggers": [{"event": "go"}]}]}`, url, url))

	ev := env.sendEvents(t, `{"name": "go", "data": {"account": "a1", "user": {"id": 1}, "flag": true, "n": {"x": 1}}}`)[0]
	runs := map[string]string{}
	for _, r := range ev.Runs {
		runs[r.Workflow] = r.RunID
	}
	want := `{
		"concurrency":    {"path": "account", "scope": "key", "value": "a1"},
		"concurrency[1]": {"scope": "workflow"},
		"throttle":       {"path": "user.id", "scope": "key", "value": 1},
		"rateLimit":      {"scope": "workflow"},
		"singleton":      {"path": "n", "scope": "workflow"},
		"idempotency":    {"path": "flag", "scope": "key", "value": true}}`
	keysOf := func(id string) string {
		r := env.call(t, http.MethodGet, "/runs/"+id, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var v struct{ Keys json.RawMessage }
		require.NoError(t, json.Unmarshal(r.Body, &v))
		return string(v.Keys)
	}
	require.JSONEq(t, want, keysOf(runs["keyed"]))
	require.JSONEq(t, `{}`, keysOf(runs["plain"]), "no keyed control, no keys")
	env.eventuallyRunStatus(t, runs["keyed"], "succeeded")

	// Re-registered with other paths: the run keeps the keys it was created with; the
	// list shows them too.
	env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [
		{"name": "keyed", "url": %q, "triggers": [{"event": "go"}], "concurrency": {"limit": 1, "key": "other"}}]}`, url))
	require.JSONEq(t, want, keysOf(runs["keyed"]))
	r := env.call(t, http.MethodGet, "/runs?workflow=keyed", nil)
	require.Equal(t, http.StatusOK, r.Status)
	var page struct {
		Runs []struct{ Keys json.RawMessage }
	}
	require.NoError(t, json.Unmarshal(r.Body, &page))
	require.Len(t, page.Runs, 1)
	require.JSONEq(t, want, string(page.Runs[0].Keys))
}

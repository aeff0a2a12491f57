package server

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNativeScheduleFieldsOverHTTP: cron triggers, delayed events and the new control
// fields over HTTP: a bad one is a 400 {"error"} naming the field and changes nothing; a
// good one is stored as sent and shown back.
func TestNativeScheduleFieldsOverHTTP(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	bad := map[string]string{
		`{"workflows": [{"name": "w", "url": "https://example.com/w", "triggers": [{"cron": "0 0 30 2 *"}]}]}`:                                                       `triggers[0].cron`,
		`{"workflows": [{"name": "w", "url": "https://example.com/w", "triggers": [{"cron": "* * * * *", "tz": "Nowhere/X"}]}]}`:                                     `triggers[0].tz`,
		`{"workflows": [{"name": "w", "url": "https://example.com/w", "triggers": [{"event": "e"}], "throttle": {"limit": 2, "perMs": 1000, "burst": 3}}]}`:          `throttle.burst`,
		`{"workflows": [{"name": "w", "url": "https://example.com/w", "triggers": [{"event": "e"}], "concurrency": {"limit": 2, "scope": "all"}}]}`:                  `concurrency.scope`,
		`{"workflows": [{"name": "w", "url": "https://example.com/w", "triggers": [{"event": "e"}], "tokenThrottle": {"tokens": 5, "perMs": 1000, "estimate": 6}}]}`: `tokenThrottle.estimate`,
	}
	for body, field := range bad {
		r := env.putApp(t, "sched", body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		require.Contains(t, r.errorMessage(t), field)
	}
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/apps/sched", nil).Status, "nothing was stored")

	r := env.putApp(t, "sched", `{"workflows": [{"name": "w", "url": "https://example.com/w",
		"triggers": [{"cron": "0 9 * * 1-5", "tz": "Europe/Berlin"}, {"event": "e"}],
		"throttle": {"limit": 4, "perMs": 60000, "burst": 1}, "concurrency": {"limit": 2, "key": "a", "scope": "app"},
		"tokenThrottle": {"tokens": 1000, "perMs": 60000, "estimate": 100}}]}`)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	w := env.call(t, http.MethodGet, "/workflows/w", nil)
	require.Equal(t, http.StatusOK, w.Status)
	require.Contains(t, string(w.Body), `"triggers":[{"cron":"0 9 * * 1-5","tz":"Europe/Berlin"},{"event":"e"}]`)
	require.Contains(t, string(w.Body), `"throttle":{"limit":4,"perMs":60000,"burst":1}`)
	require.Contains(t, string(w.Body), `"concurrency":[{"limit":2,"key":"a","scope":"app"}]`)
	require.Contains(t, string(w.Body), `"tokenThrottle":{"tokens":1000,"perMs":60000,"estimate":100}`)

	for body, field := range map[string]string{
		`{"name": "e", "ts": 1, "delay": "1s"}`:            `event: give "ts" or "delay", not both`,
		`{"name": "e", "delay": "400d"}`:                   `event.delay`,
		`[{"name": "e"}, {"name": "e", "delay": "9000h"}]`: `events[1].delay`,
	} {
		r := env.call(t, http.MethodPost, "/events", []byte(body), "Content-Type", "application/json")
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		require.Contains(t, r.errorMessage(t), field)
	}
	r = env.call(t, http.MethodGet, "/events", nil)
	require.JSONEq(t, `{"events":[]}`, string(r.Body), "a refused request stores nothing")
	res := env.call(t, http.MethodPost, "/events", []byte(`{"name": "e", "delay": "1h"}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	ev := decodeJSON[struct {
		Events []struct {
			ID           string
			ScheduledFor int64
			Runs         []any
		}
	}](t, res).Events[0]
	require.NotZero(t, ev.ScheduledFor)
	require.Empty(t, ev.Runs)
	got := env.call(t, http.MethodGet, "/events/"+ev.ID, nil)
	require.Contains(t, string(got.Body), `"pending":true`)
}

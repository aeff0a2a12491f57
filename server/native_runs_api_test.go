package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/sdk"
)

type runStep struct {
	ID      int
	Name    string
	Type    string
	Status  string
	EndedAt int64
}

type nativeRun struct {
	RunID     string
	Workflow  string
	App       string
	Status    string
	CreatedAt int64
	StartedAt int64
	EndedAt   int64
	EventIDs  []string
	Keys      map[string]json.RawMessage
	Steps     []runStep
	Waiting   *struct {
		Reason string
		Since  int64
	}
}

type runStats struct{ Active, Queued, Running int }

func (e *apiEnv) nativeRun(t *testing.T, id string) nativeRun {
	t.Helper()
	r := e.call(t, http.MethodGet, "/runs/"+id, nil)
	require.Equal(t, http.StatusOK, r.Status, "GET /runs/%s: %s", id, r.Body)
	return decodeJSON[nativeRun](t, r)
}

func (e *apiEnv) eventuallyRunStatus(t *testing.T, id, status string) nativeRun {
	t.Helper()
	var run nativeRun
	eventually(t, "run "+id+" "+status, func() bool {
		run = e.nativeRun(t, id)
		return run.Status == status
	})
	return run
}

func (e *apiEnv) runList(t *testing.T, query string) ([]string, string) {
	t.Helper()
	r := e.call(t, http.MethodGet, "/runs"+query, nil)
	require.Equal(t, http.StatusOK, r.Status, "GET /runs%s: %s", query, r.Body)
	page := decodeJSON[struct {
		Runs   []nativeRun
		Cursor string
	}](t, r)
	ids := []string{}
	for _, run := range page.Runs {
		ids = append(ids, run.RunID)
	}
	return ids, page.Cursor
}

func (e *apiEnv) runStats(t *testing.T) runStats {
	t.Helper()
	r := e.call(t, http.MethodGet, "/runs/stats", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return decodeJSON[runStats](t, r)
}

// TestNativeRunsAPI: a native run is listed, filtered, read with its steps and events,
// cancelled; its status follows what it does (succeeded, waiting, cancelled); the stats
// count live runs; runs started by an Upstash trigger are not native runs.
func TestNativeRunsAPI(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	quick := app.mount("/quick", func(c *sdk.Context) (any, error) {
		return sdk.Run(c, "only", func() (string, error) { return "done", nil })
	})
	waiter := app.mount("/waiter", func(c *sdk.Context) (any, error) {
		if _, err := sdk.Run(c, "before", func() (int, error) { return 1, nil }); err != nil {
			return nil, err
		}
		res, err := c.WaitForEvent("hold", "release", time.Hour)
		if err != nil {
			return nil, err
		}
		return string(res.Data), nil
	})
	env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [
		{"name": "quick", "url": %q, "triggers": [{"event": "go"}]},
		{"name": "waiter", "url": %q, "triggers": [{"event": "hold"}]}]}`, quick, waiter))

	ev := env.sendEvents(t, `{"name": "go", "data": {"n": 1}}`)[0]
	a := env.eventuallyRunStatus(t, ev.Runs[0].RunID, "succeeded")
	require.Equal(t, "quick", a.Workflow)
	require.Equal(t, "docs", a.App)
	require.Equal(t, []string{ev.ID}, a.EventIDs)
	require.Len(t, a.Steps, 1)
	require.Equal(t, runStep{ID: 1, Name: "only", Type: "Run", Status: "succeeded", EndedAt: a.Steps[0].EndedAt}, a.Steps[0])
	require.NotZero(t, a.CreatedAt)
	require.Equal(t, a.Steps[0].EndedAt, a.StartedAt)
	require.GreaterOrEqual(t, a.EndedAt, a.StartedAt)
	require.NotNil(t, a.Keys)
	require.Nil(t, a.Waiting)

	b := env.sendEvents(t, `{"name": "hold", "data": {}}`)[0].Runs[0].RunID
	c := env.sendEvents(t, `{"name": "hold", "data": {}}`)[0].Runs[0].RunID
	for _, id := range []string{b, c} {
		run := env.eventuallyRunStatus(t, id, "waiting")
		require.NotNil(t, run.Waiting)
		require.Contains(t, run.Waiting.Reason, "waiting for an event")
		require.Len(t, run.Steps, 1, "the step before the wait is recorded")
	}
	require.Equal(t, runStats{Active: 2}, env.runStats(t), "waiting runs are active, neither queued nor running")

	// An Upstash-triggered run is not a native run.
	env.trigger(t, "wfr_upstash", env.Endpoint.URL("/plain"), `{}`)
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/runs/wfr_upstash", nil).Status)
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodPost, "/runs/wfr_upstash/cancel", nil).Status)

	// Listing: newest first, filters, pages.
	ids, cursor := env.runList(t, "")
	require.Equal(t, []string{c, b, a.RunID}, ids)
	require.Empty(t, cursor)
	ids, _ = env.runList(t, "?workflow=waiter")
	require.Equal(t, []string{c, b}, ids)
	ids, _ = env.runList(t, "?app=docs&status=succeeded")
	require.Equal(t, []string{a.RunID}, ids)
	ids, _ = env.runList(t, "?app=other")
	require.Empty(t, ids)
	ids, _ = env.runList(t, "?status=waiting")
	require.Equal(t, []string{c, b}, ids)
	var walked []string
	for q := "?limit=1"; ; {
		page, next := env.runList(t, q)
		require.LessOrEqual(t, len(page), 1)
		walked = append(walked, page...)
		if next == "" {
			break
		}
		q = "?limit=1&cursor=" + next
	}
	require.Equal(t, []string{c, b, a.RunID}, walked)

	// Cancel: the run ends cancelled; a second cancel or an ended run is a 409.
	r := env.call(t, http.MethodPost, "/runs/"+b+"/cancel", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	cancelled := decodeJSON[nativeRun](t, r)
	require.Equal(t, "cancelled", cancelled.Status)
	require.NotZero(t, cancelled.EndedAt)
	for _, id := range []string{b, a.RunID} {
		r = env.call(t, http.MethodPost, "/runs/"+id+"/cancel", nil)
		require.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		require.Contains(t, string(r.Body), "already ended")
	}
	require.Equal(t, runStats{Active: 1}, env.runStats(t))
	ids, _ = env.runList(t, "?status=cancelled")
	require.Equal(t, []string{b}, ids)

	// A native event wakes the other; it succeeds with the event's data.
	env.sendEvents(t, `{"name": "release", "data": "go on"}`)
	env.eventuallyRunStatus(t, c, "succeeded")
	require.Equal(t, runStats{}, env.runStats(t))

	// Bad input is a 400 naming the parameter; unknown runs are a 404.
	for q, part := range map[string]string{
		"?status=done": "status", "?limit=0": "limit", "?limit=1001": "limit", "?limit=x": "limit",
		"?cursor=zz": "cursor", "?workflows=x": "workflows",
	} {
		r := env.call(t, http.MethodGet, "/runs"+q, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", q, r.Body)
		require.Contains(t, string(r.Body), part, q)
	}
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/runs/wfr_nope", nil).Status)
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodPost, "/runs/wfr_nope/cancel", nil).Status)
}

// TestNativeRunsQueuedAndRunning: at a project ceiling of 1, a run whose delivery is in
// flight is running and holds the slot (flow-state concurrency {1, 1}); the next run is
// queued, with why; both leave the stats when they end.
func TestNativeRunsQueuedAndRunning(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.ProjectCeiling = 1 }})
	app := newSDKApp(t, env)
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // a failing test must not leave the delivery blocked
	entered := make(chan struct{}, 4)
	url := app.mount("/slow", func(c *sdk.Context) (any, error) {
		return sdk.Run(c, "slow", func() (string, error) {
			entered <- struct{}{}
			<-release
			return "ok", nil
		})
	})
	env.mustPutApp(t, "jobs", fmt.Sprintf(`{"workflows": [{"name": "slow", "url": %q, "triggers": [{"event": "job"}]}]}`, url))
	first := env.sendEvents(t, `{"name": "job", "data": 1}`)[0].Runs[0].RunID
	<-entered
	second := env.sendEvents(t, `{"name": "job", "data": 2}`)[0].Runs[0].RunID

	require.Equal(t, "running", env.eventuallyRunStatus(t, first, "running").Status)
	q := env.eventuallyRunStatus(t, second, "queued")
	require.NotNil(t, q.Waiting)
	require.NotEmpty(t, q.Waiting.Reason)
	require.Zero(t, q.StartedAt)
	require.Equal(t, runStats{Active: 2, Queued: 1, Running: 1}, env.runStats(t))
	fs := decodeJSON[struct{ Concurrency struct{ Limit, InUse int } }](t, env.call(t, http.MethodGet, "/flow-state", nil))
	require.Equal(t, 1, fs.Concurrency.Limit)
	require.Equal(t, 1, fs.Concurrency.InUse)

	free()
	env.eventuallyRunStatus(t, first, "succeeded")
	env.eventuallyRunStatus(t, second, "succeeded")
	require.Equal(t, runStats{}, env.runStats(t))
}

// TestNativeFlowState: the rateLimit and idempotency states of each workflow, as the
// injected clock moves; filters; unknown names are a 404; debounce and batch are empty.
func TestNativeFlowState(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.Now = clock.Now }})
	env.mustPutApp(t, "a", fmt.Sprintf(`{"workflows": [
		{"name": "limited", "url": %q, "triggers": [{"event": "e"}], "rateLimit": {"limit": 2, "perMs": 60000, "key": "user"}},
		{"name": "once", "url": %q, "triggers": [{"event": "e"}], "idempotency": {"key": "user", "periodMs": 3600000}}]}`,
		env.Endpoint.URL("/l"), env.Endpoint.URL("/o")))
	env.mustPutApp(t, "b", fmt.Sprintf(`{"workflows": [{"name": "plain", "url": %q, "triggers": [{"event": "x"}]}]}`, env.Endpoint.URL("/p")))

	type state struct {
		Debounce, Batch []any
		RateLimit       []struct {
			App, Workflow string
			Keys, Limited int
			NextAllowedAt string
		}
		Idempotency []struct {
			App, Workflow string
			Keys          int
			NextCloseAt   string
		}
		Concurrency struct{ Limit, InUse int }
	}
	read := func(q string) state {
		t.Helper()
		r := env.call(t, http.MethodGet, "/flow-state"+q, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return decodeJSON[state](t, r)
	}
	st := read("")
	require.NotNil(t, st.Debounce)
	require.NotNil(t, st.Batch)
	require.Len(t, st.RateLimit, 1)
	require.Equal(t, 0, st.RateLimit[0].Keys)
	require.Len(t, st.Idempotency, 1)
	require.Equal(t, 0, st.Idempotency[0].Keys)

	t0 := clock.Now()
	for _, u := range []string{"u1", "u1", "u2"} {
		env.sendEvents(t, fmt.Sprintf(`{"name": "e", "data": {"user": %q}}`, u))
	}
	st = read("")
	require.Equal(t, "limited", st.RateLimit[0].Workflow)
	require.Equal(t, "a", st.RateLimit[0].App)
	require.Equal(t, 2, st.RateLimit[0].Keys, "u1 and u2 have recent admissions")
	require.Equal(t, 1, st.RateLimit[0].Limited, "u1 used its burst of 2")
	// GCRA: limit 2 per minute admits again one emission interval (30 s) after the burst.
	require.Equal(t, t0.Add(30*time.Second).UTC().Format(time.RFC3339Nano), st.RateLimit[0].NextAllowedAt)
	require.Equal(t, 2, st.Idempotency[0].Keys, "windows of u1 and u2")
	require.Equal(t, t0.Add(time.Hour).UTC().Format(time.RFC3339Nano), st.Idempotency[0].NextCloseAt)

	clock.Advance(30 * time.Second)
	st = read("?workflow=limited")
	require.Empty(t, st.Idempotency)
	require.Equal(t, 0, st.RateLimit[0].Limited, "u1 admits again")
	require.Empty(t, st.RateLimit[0].NextAllowedAt)

	clock.Advance(time.Hour)
	st = read("?app=a")
	require.Equal(t, 0, st.Idempotency[0].Keys, "the windows closed")
	require.Equal(t, 0, st.RateLimit[0].Keys, "the rate scopes are idle")
	st = read("?app=b")
	require.Empty(t, st.RateLimit)
	require.Empty(t, st.Idempotency)

	for q, want := range map[string]int{
		"?workflow=nope": http.StatusNotFound, "?app=nope": http.StatusNotFound,
		"?app=b&workflow=limited": http.StatusNotFound, "?wf=limited": http.StatusBadRequest,
	} {
		r := env.call(t, http.MethodGet, "/flow-state"+q, nil)
		require.Equal(t, want, r.Status, "%s: %s", q, r.Body)
		require.True(t, strings.Contains(string(r.Body), `"error"`), q)
	}
}

// TestNativeFlowStateBuffers: debounce and batch backlogs per workflow, with the
// earliest deadline and the oldest buffered event; a throttled run is queued until its
// start.
func TestNativeFlowStateBuffers(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.Now = clock.Now }})
	env.mustPutApp(t, "bufs", fmt.Sprintf(`{"workflows": [
		{"name": "deb", "url": %q, "triggers": [{"event": "e"}], "debounce": {"periodMs": 5000, "key": "user"}},
		{"name": "bat", "url": %q, "triggers": [{"event": "e"}], "batch": {"maxSize": 10, "timeoutMs": 60000}},
		{"name": "thr", "url": %q, "triggers": [{"event": "t"}], "throttle": {"limit": 1, "perMs": 60000}}]}`,
		env.Endpoint.URL("/d"), env.Endpoint.URL("/b"), env.Endpoint.URL("/t")))
	type state struct {
		Debounce []struct {
			App, Workflow string
			Pending       int
			NextFireAt    string
		}
		Batch []struct {
			App, Workflow string
			Buffered      int
			OldestAt      string
		}
	}
	read := func(q string) state {
		t.Helper()
		r := env.call(t, http.MethodGet, "/flow-state"+q, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return decodeJSON[state](t, r)
	}
	st := read("")
	require.Empty(t, st.Debounce, "no backlog yet")
	require.Empty(t, st.Batch)

	t0 := clock.Now()
	for _, u := range []string{"u1", "u2", "u1"} {
		env.sendEvents(t, fmt.Sprintf(`{"name": "e", "data": {"user": %q}}`, u))
		clock.Advance(time.Second)
	}
	st = read("")
	require.Len(t, st.Debounce, 1)
	require.Equal(t, "deb", st.Debounce[0].Workflow)
	require.Equal(t, "bufs", st.Debounce[0].App)
	require.Equal(t, 2, st.Debounce[0].Pending, "u1 and u2 each wait to fire")
	require.Equal(t, t0.Add(6*time.Second).UTC().Format(time.RFC3339Nano), st.Debounce[0].NextFireAt, "u2's deadline (u1's slid to +7s)")
	require.Len(t, st.Batch, 1)
	require.Equal(t, "bat", st.Batch[0].Workflow)
	require.Equal(t, 3, st.Batch[0].Buffered)
	require.Equal(t, t0.UTC().Format(time.RFC3339Nano), st.Batch[0].OldestAt)
	st = read("?workflow=bat")
	require.Empty(t, st.Debounce)
	require.Len(t, st.Batch, 1)

	// Throttle 1 per minute: the second run is created and queued until its start.
	env.sendEvents(t, `{"name": "t", "data": 1}`)
	second := env.sendEvents(t, `{"name": "t", "data": 2}`)[0].Runs[0].RunID
	run := env.nativeRun(t, second)
	require.Equal(t, "queued", run.Status)
	require.NotNil(t, run.Waiting)
	require.Contains(t, run.Waiting.Reason, "throttled")
	// The first run may still be on its way out (its start is booked durably before it
	// is sent); the second stays queued.
	eventually(t, "only the throttled run queued", func() bool { return env.runStats(t).Queued == 1 })
}

// POST /runs/{id}/replay re-runs a failed run from its failed step: the dead letter
// leaves the DLQ, the run is live again and can succeed; anything else is refused.
func TestNativeRunReplay(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	failing := true
	ep := deliverytest.NewEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		mu.Lock()
		defer mu.Unlock()
		sdkHeader := http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}
		if failing {
			return http.StatusInternalServerError, sdkHeader, "down"
		}
		return http.StatusOK, sdkHeader, "{}"
	})
	env := newAPI(t, envOptions{})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"event": "e"}], "retries": 0}]}`, ep.URL("/wf")))
	res := env.sendEvents(t, `{"name": "e", "data": {}}`)
	runID := res[0].Runs[0].RunID
	env.eventuallyRunStatus(t, runID, "failed")
	var before struct {
		DLQID string `json:"dlqId"`
	}
	require.NoError(t, json.Unmarshal(env.call(t, http.MethodGet, "/runs/"+runID, nil).Body, &before))
	require.NotEmpty(t, before.DLQID)

	for body, want := range map[string]string{`{"cap": {"maxCost": -5}}`: "cap.maxCost", `{"cap": {}}`: "cap", `{"retries": 3}`: "retries", `[1]`: "JSON object"} {
		r := env.call(t, http.MethodPost, "/runs/"+runID+"/replay", []byte(body), "Content-Type", "application/json")
		require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
		require.Contains(t, r.errorMessage(t), want)
	}
	require.Equal(t, "failed", env.nativeRun(t, runID).Status, "a refused replay changes nothing")

	mu.Lock()
	failing = false
	mu.Unlock()
	r := env.call(t, http.MethodPost, "/runs/"+runID+"/replay", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.NotEqual(t, "failed", decodeJSON[nativeRun](t, r).Status, "the run is live again")
	ep.Requests.Wait(t, waitTimeout, 2, nil) // the failed delivery, sent again, now answered 200
	dl := env.call(t, http.MethodGet, "/v2/workflows/dlq", nil)
	require.Equal(t, http.StatusOK, dl.Status)
	require.NotContains(t, string(dl.Body), `"dlqId":"`+before.DLQID+`"`, "the run's dead letter left the DLQ")

	r = env.call(t, http.MethodPost, "/runs/"+runID+"/replay", []byte(`{}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusConflict, r.Status, "only a failed run is replayed: %s", r.Body)
	require.NotEqual(t, "failed", env.nativeRun(t, runID).Status)
	r = env.call(t, http.MethodPost, "/runs/wfr_nope/replay", nil)
	require.Equal(t, http.StatusNotFound, r.Status)
}

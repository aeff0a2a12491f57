package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/sdk"
)

type eventRun struct {
	Workflow    string `json:"workflow"`
	RunID       string `json:"runId"`
	Dropped     bool   `json:"dropped"`
	Deduped     bool   `json:"deduped"`
	Skipped     bool   `json:"skipped"`
	HolderRunID string `json:"holderRunId"`
	Debounced   bool   `json:"debounced"`
	Batched     bool   `json:"batched"`
}

type eventResult struct {
	ID      string     `json:"id"`
	Deduped bool       `json:"deduped"`
	Runs    []eventRun `json:"runs"`
}

func (e *apiEnv) sendEvents(t *testing.T, body string) []eventResult {
	t.Helper()
	r := e.call(t, http.MethodPost, "/events", []byte(body), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, r.Status, "POST /events: %s", r.Body)
	return decodeJSON[struct{ Events []eventResult }](t, r).Events
}

// sdkApp serves Go SDK workflow routes on 127.0.0.1, signed with the test project's keys.
type sdkApp struct {
	srv *httptest.Server
	mux *http.ServeMux
	env func(string) string
}

func newSDKApp(t *testing.T, env *apiEnv) *sdkApp {
	vals := map[string]string{"QSTASH_URL": env.URL, "QSTASH_TOKEN": env.Token,
		"QSTASH_CURRENT_SIGNING_KEY": testCurrentKey, "QSTASH_NEXT_SIGNING_KEY": testNextKey}
	a := &sdkApp{mux: http.NewServeMux(), env: func(k string) string { return vals[k] }}
	a.srv = httptest.NewServer(a.mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *sdkApp) mount(path string, route sdk.RouteFunc) string {
	a.mux.Handle(path, sdk.Serve(route, sdk.WithServeEnv(a.env)))
	return a.srv.URL + path
}

// finished is what a native run's route saw when it finished.
type finished struct {
	payload  string
	workflow string
	app      string
	waited   string
}

type finishes struct {
	mu   sync.Mutex
	runs map[string]finished
}

func (f *finishes) put(runID string, v finished) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs == nil {
		f.runs = map[string]finished{}
	}
	f.runs[runID] = v
}

func (f *finishes) get(runID string) (finished, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.runs[runID]
	return v, ok
}

// TestNativeEventsStartRuns: an event fans out to every workflow whose trigger names it;
// each run is an ordinary workflow run that a Go SDK route serves unmodified, with the
// event as its payload and Duraton-Workflow / Duraton-App on its deliveries.
func TestNativeEventsStartRuns(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	var done finishes
	route := func(c *sdk.Context) (any, error) {
		payload := string(c.Payload())
		step, err := sdk.Run(c, "step", func() (string, error) { return "ran", nil })
		if err != nil {
			return nil, err
		}
		done.put(c.RunID, finished{payload: payload, workflow: c.Headers.Get("Duraton-Workflow"), app: c.Headers.Get("Duraton-App")})
		return step, nil
	}
	urlA, urlB := app.mount("/a", route), app.mount("/b", route)
	env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [
		{"name": "sync.account", "url": %q, "triggers": [{"event": "doc.updated"}]},
		{"name": "search", "url": %q, "triggers": [{"event": "doc.updated"}, {"event": "doc.deleted"}]}]}`, urlA, urlB))

	res := env.sendEvents(t, `{"name": "doc.updated", "data": {"index": "main", "accountId": "a1"}}`)
	require.Len(t, res, 1)
	ev := res[0]
	require.True(t, strings.HasPrefix(ev.ID, "evt_"), ev.ID)
	require.Len(t, ev.Runs, 2)
	require.Equal(t, "search", ev.Runs[0].Workflow)
	require.Equal(t, "sync.account", ev.Runs[1].Workflow)
	for _, r := range ev.Runs {
		require.True(t, strings.HasPrefix(r.RunID, "wfr_"), "%+v", r)
	}
	for _, r := range ev.Runs {
		var f finished
		eventually(t, "run "+r.RunID+" finished", func() bool {
			var ok bool
			f, ok = done.get(r.RunID)
			return ok
		})
		require.Equal(t, r.Workflow, f.workflow)
		require.Equal(t, "docs", f.app)
		var p struct {
			ID, Name string
			Data     map[string]string
			Ts       int64
			Events   []struct {
				ID, Name string
				Data     map[string]string
				Ts       int64
			}
		}
		require.NoError(t, json.Unmarshal([]byte(f.payload), &p), f.payload)
		require.Equal(t, ev.ID, p.ID)
		require.Equal(t, "doc.updated", p.Name)
		require.Equal(t, map[string]string{"index": "main", "accountId": "a1"}, p.Data)
		require.NotZero(t, p.Ts)
		require.Len(t, p.Events, 1)
		require.Equal(t, p.ID, p.Events[0].ID)
		require.Equal(t, p.Data, p.Events[0].Data)
		// A native run is an ordinary run: it ends as one, visible to /v2/workflows/logs.
		eventually(t, "run "+r.RunID+" succeeded", func() bool {
			lr := env.call(t, http.MethodGet, "/v2/workflows/logs?workflowRunId="+r.RunID, nil)
			return lr.Status == http.StatusOK && strings.Contains(string(lr.Body), `"RUN_SUCCESS"`)
		})
	}

	// An array: each event answered in order; a name nobody subscribes to is stored with
	// no runs; "dedupeId" inside data is data.
	res = env.sendEvents(t, `[{"name": "doc.deleted", "data": 7}, {"name": "nobody.listens", "data": {"dedupeId": ""}}]`)
	require.Len(t, res, 2)
	require.Len(t, res[0].Runs, 1)
	require.Equal(t, "search", res[0].Runs[0].Workflow)
	require.Empty(t, res[1].Runs)
	require.NotNil(t, res[1].Runs, "runs is [] rather than absent")

	// GET /events lists them newest first; GET /events/{id} shows what each workflow did.
	r := env.call(t, http.MethodGet, "/events", nil)
	require.Equal(t, http.StatusOK, r.Status)
	list := decodeJSON[struct {
		Events []struct {
			ID, Name string
			Data     json.RawMessage
			Runs     []eventRun
		}
		Cursor string
	}](t, r)
	require.Len(t, list.Events, 3)
	require.Equal(t, []string{"nobody.listens", "doc.deleted", "doc.updated"}, []string{list.Events[0].Name, list.Events[1].Name, list.Events[2].Name})
	require.JSONEq(t, `{"dedupeId": ""}`, string(list.Events[0].Data))
	require.Empty(t, list.Cursor)
	r = env.call(t, http.MethodGet, "/events/"+ev.ID, nil)
	require.Equal(t, http.StatusOK, r.Status)
	one := decodeJSON[struct {
		ID   string
		Runs []eventRun
	}](t, r)
	require.Equal(t, ev.Runs, one.Runs)
	require.Equal(t, http.StatusNotFound, env.call(t, http.MethodGet, "/events/evt_000000000000000000000000", nil).Status)

	// Pages: limit and cursor walk the list without overlap; name filters.
	page1 := decodeJSON[struct {
		Events []struct{ ID string }
		Cursor string
	}](t, env.call(t, http.MethodGet, "/events?limit=2", nil))
	require.Len(t, page1.Events, 2)
	require.NotEmpty(t, page1.Cursor)
	page2 := decodeJSON[struct {
		Events []struct{ ID string }
		Cursor string
	}](t, env.call(t, http.MethodGet, "/events?limit=2&cursor="+page1.Cursor, nil))
	require.Len(t, page2.Events, 1)
	require.Equal(t, ev.ID, page2.Events[0].ID)
	require.Empty(t, page2.Cursor)
	byName := decodeJSON[struct{ Events []struct{ ID string } }](t, env.call(t, http.MethodGet, "/events?name=doc.updated", nil))
	require.Len(t, byName.Events, 1)
	require.Equal(t, http.StatusBadRequest, env.call(t, http.MethodGet, "/events?limit=0", nil).Status)
	require.Equal(t, http.StatusBadRequest, env.call(t, http.MethodGet, "/events?cursor=nope", nil).Status)

	// Another project neither sees the events nor triggers the workflows.
	other := env.withProject(t, "other", "other-token-0123456789abcdef0123456789")
	require.Equal(t, http.StatusNotFound, other.call(t, http.MethodGet, "/events/"+ev.ID, nil).Status)
	res = other.sendEvents(t, `{"name": "doc.updated"}`)
	require.Empty(t, res[0].Runs)
}

// TestNativeEventDedupe: a repeated dedupeId within 24 h answers the first event's id
// with deduped and fans out to nothing, in the same request or a later one; after the
// window it is a new event.
func TestNativeEventDedupe(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.Now = clock.Now }})
	env.mustPutApp(t, "docs", fmt.Sprintf(`{"workflows": [{"name": "a", "url": %q, "triggers": [{"event": "e"}]},
		{"name": "b", "url": %q, "triggers": [{"event": "e"}]}]}`, env.Endpoint.URL("/a"), env.Endpoint.URL("/b")))
	res := env.sendEvents(t, `[{"name": "e", "dedupeId": "upd-42"}, {"name": "e", "dedupeId": "upd-42"}, {"name": "e", "dedupeId": "other"}]`)
	require.Len(t, res[0].Runs, 2)
	require.Equal(t, eventResult{ID: res[0].ID, Deduped: true, Runs: []eventRun{}}, res[1])
	require.Len(t, res[2].Runs, 2)
	require.NotEqual(t, res[0].ID, res[2].ID)

	clock.Advance(24*time.Hour - time.Millisecond)
	again := env.sendEvents(t, `{"name": "e", "dedupeId": "upd-42"}`)
	require.Equal(t, eventResult{ID: res[0].ID, Deduped: true, Runs: []eventRun{}}, again[0])
	clock.Advance(time.Millisecond)
	fresh := env.sendEvents(t, `{"name": "e", "dedupeId": "upd-42"}`)
	require.False(t, fresh[0].Deduped)
	require.NotEqual(t, res[0].ID, fresh[0].ID)
	require.Len(t, fresh[0].Runs, 2)

	list := decodeJSON[struct{ Events []struct{ ID string } }](t, env.call(t, http.MethodGet, "/events", nil))
	require.Len(t, list.Events, 3, "a deduplicated event is not stored")
}

// TestNativeEventWakesWaiters: an event wakes the waitForEvent waiters whose event id is
// its name, with its data.
func TestNativeEventWakesWaiters(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	var done finishes
	url := app.mount("/waiter", func(c *sdk.Context) (any, error) {
		w, err := c.WaitForEvent("paid", "order.paid", time.Hour)
		if err != nil {
			return nil, err
		}
		done.put(c.RunID, finished{waited: string(w.Data)})
		return nil, nil
	})
	env.mustPutApp(t, "shop", fmt.Sprintf(`{"workflows": [{"name": "wait.payment", "url": %q, "triggers": [{"event": "order.created"}]}]}`, url))
	res := env.sendEvents(t, `{"name": "order.created", "data": {"order": 1}}`)
	runID := res[0].Runs[0].RunID
	eventually(t, "the run waits", func() bool {
		r := env.call(t, http.MethodGet, "/v2/waiters/order.paid", nil)
		return r.Status == http.StatusOK && strings.Contains(string(r.Body), `"url":"`+url+`"`)
	})
	res = env.sendEvents(t, `{"name": "order.paid", "data": {"amount": 5}}`)
	require.Empty(t, res[0].Runs, "no workflow is triggered by order.paid")
	var f finished
	eventually(t, "the waiter resumed", func() bool {
		var ok bool
		f, ok = done.get(runID)
		return ok
	})
	require.JSONEq(t, `{"amount": 5}`, f.waited)
}

func TestNativeEventValidation(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	tests := []struct{ name, body, want string }{
		{"NoName", `{"data": 1}`, "event.name"},
		{"UnknownField", `{"name": "e", "dat": 1}`, `event.dat`},
		{"EmptyDedupe", `{"name": "e", "dedupeId": ""}`, "event.dedupeId"},
		{"LongDedupe", `{"name": "e", "dedupeId": "` + strings.Repeat("x", 257) + `"}`, "event.dedupeId"},
		{"LongName", `{"name": "` + strings.Repeat("x", 257) + `"}`, "event.name"},
		{"ArrayItem", `[{"name": "e"}, {"name": 3}]`, "events[1].name"},
		{"EmptyArray", `[]`, "no event"},
		{"NotJSON", `{"name"`, "event"},
		{"Scalar", `3`, "array of events"},
	}
	for _, tt := range tests {
		r := env.call(t, http.MethodPost, "/events", []byte(tt.body), "Content-Type", "application/json")
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", tt.name, r.Body)
		require.Contains(t, r.errorMessage(t), tt.want, tt.name)
	}
	var b strings.Builder
	b.WriteString("[")
	for i := range 1001 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"name": "e"}`)
	}
	b.WriteString("]")
	r := env.call(t, http.MethodPost, "/events", []byte(b.String()), "Content-Type", "application/json")
	require.Equal(t, http.StatusPreconditionFailed, r.Status, "%s", r.Body)
	list := decodeJSON[struct{ Events []struct{ ID string } }](t, env.call(t, http.MethodGet, "/events", nil))
	require.Empty(t, list.Events, "refused requests stored nothing")
}

// testClock is a hand-driven clock for the engine (the gates and dedupe windows read it).
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestEventFanOutBounded: a request whose events could start more runs than the
// per-request limit is refused whole with 413 (nothing stored: no event, no run), one at
// the limit goes through, and a request that finds its project's requests creating the
// in-flight limit already is refused with 429.
func TestEventFanOutBounded(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{native: func(c *native.Config) { c.MaxRunsPerRequest, c.MaxRunsInFlight = 6, 6 }})
	env.mustPutApp(t, "fan", fmt.Sprintf(`{"workflows": [
		{"name": "w1", "url": %q, "triggers": [{"event": "fan"}], "throttle": {"limit": 1, "perMs": 3600000}},
		{"name": "w2", "url": %q, "triggers": [{"event": "fan"}], "throttle": {"limit": 1, "perMs": 3600000}},
		{"name": "w3", "url": %q, "triggers": [{"event": "fan"}, {"event": "other"}], "throttle": {"limit": 1, "perMs": 3600000}}]}`,
		env.Endpoint.URL("/w1"), env.Endpoint.URL("/w2"), env.Endpoint.URL("/w3")))

	r := env.call(t, http.MethodPost, "/events", []byte(`[{"name": "fan"}, {"name": "fan"}, {"name": "other"}]`), "Content-Type", "application/json")
	require.Equal(t, http.StatusRequestEntityTooLarge, r.Status, "%s", r.Body)
	msg := r.errorMessage(t)
	require.Contains(t, msg, "up to 7 workflow runs")
	require.Contains(t, msg, "the limit is 6 per request")
	list := env.call(t, http.MethodGet, "/events", nil)
	require.Equal(t, http.StatusOK, list.Status)
	require.NotContains(t, string(list.Body), `"fan"`, "nothing of the refused request was stored")

	res := env.sendEvents(t, `[{"name": "fan"}, {"name": "fan"}]`)
	require.Len(t, res, 2)
	require.Len(t, res[0].Runs, 3)

	// A request that finds the project's budget taken by others is told to retry.
	err := nativeError(fmt.Errorf("%w: the limit in flight is 6; retry shortly", native.ErrBusy))
	var api *apiError
	require.ErrorAs(t, err, &api)
	require.Equal(t, http.StatusTooManyRequests, api.status)
	require.Equal(t, "events: the limit in flight is 6; retry shortly", api.msg)
}

package sdk_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

// seenRun is what a native run's route saw on its last delivery.
type seenRun struct {
	runID    string
	workflow string
	app      string
	event    sdk.ReceivedEvent
	events   []sdk.ReceivedEvent
}

// TestAppOnEngine: one App serves two workflows under a base path on a real engine;
// RegisterApp derives the registration from the definitions; events start the runs and
// the routes see them with c.Event() and, for the batch, c.Events() in receive order.
func TestAppOnEngine(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	got := make(chan seenRun, 8)
	route := func(c *sdk.Context) (any, error) {
		ev, ok := c.Event()
		if !ok {
			return nil, sdk.NonRetryable(io.ErrUnexpectedEOF)
		}
		return sdk.Run(c, "record", func() (bool, error) {
			got <- seenRun{runID: c.RunID, workflow: c.Workflow(), app: c.App(), event: ev, events: c.Events()}
			return true, nil
		})
	}
	retries := 0
	app, err := sdk.NewApp("shop", h.app.URL+"/wf/", []sdk.Workflow{
		{Name: "welcome", Triggers: []string{"user.created"}, Retries: &retries, Handler: route,
			Concurrency: []sdk.Concurrency{{Limit: 2, Key: "user"}}, Idempotency: &sdk.Idempotency{Key: "user"}},
		{Name: "digest", Triggers: []string{"order.placed"}, Handler: route,
			Batch: &sdk.Batch{MaxSize: 3, TimeoutMs: 60_000}},
	}, sdk.WithServeEnv(h.srv.Env()))
	require.NoError(t, err)
	require.Equal(t, h.app.URL+"/wf/welcome", app.URL("welcome"))
	require.Empty(t, app.URL("nope"))
	h.mux.Handle("/wf/", app)

	ctx := context.Background()
	reg, err := h.client.RegisterApp(ctx, app)
	require.NoError(t, err)
	require.Equal(t, "shop", reg.Name)
	require.Len(t, reg.Workflows, 2)
	byName := map[string]sdk.RegisteredWorkflow{}
	for _, w := range reg.Workflows {
		byName[w.Name] = w
	}
	require.Equal(t, h.app.URL+"/wf/welcome", byName["welcome"].URL)
	require.Equal(t, 0, byName["welcome"].Retries)
	require.Equal(t, []sdk.Concurrency{{Limit: 2, Key: "user"}}, byName["welcome"].FlowControl.Concurrency)
	require.Equal(t, &sdk.Idempotency{Key: "user", PeriodMs: 86_400_000}, byName["welcome"].FlowControl.Idempotency)
	require.Equal(t, []string{"order.placed"}, byName["digest"].TriggerEvents())
	require.Equal(t, &sdk.Batch{MaxSize: 3, TimeoutMs: 60_000}, byName["digest"].FlowControl.Batch)
	require.Equal(t, 3, byName["digest"].Retries, "nil Retries takes the server's default")

	one, err := h.client.SendEvent(ctx, sdk.Event{Name: "user.created", Data: map[string]string{"user": "ann"}})
	require.NoError(t, err)
	welcome, ok := one.Run("welcome")
	require.True(t, ok)
	require.True(t, welcome.Started())
	batch, err := h.client.SendEvents(ctx, []sdk.Event{
		{Name: "order.placed", Data: map[string]int{"order": 1}},
		{Name: "order.placed", Data: map[string]int{"order": 2}},
		{Name: "order.placed", Data: map[string]int{"order": 3}},
	})
	require.NoError(t, err)
	for _, r := range batch {
		d, ok := r.Run("digest")
		require.True(t, ok)
		require.True(t, d.Batched)
	}

	runs := map[string]seenRun{}
	for range 2 {
		select {
		case s := <-got:
			runs[s.workflow] = s
		case <-time.After(30 * time.Second):
			t.Fatalf("runs seen so far: %v", runs)
		}
	}
	w := runs["welcome"]
	require.Equal(t, welcome.RunID, w.runID)
	require.Equal(t, "shop", w.app)
	require.Equal(t, one.ID, w.event.ID)
	require.JSONEq(t, `{"user":"ann"}`, string(w.event.Data))
	require.Len(t, w.events, 1)

	d := runs["digest"]
	require.Equal(t, "shop", d.app)
	require.Len(t, d.events, 3, "one run carries the whole batch")
	for i, e := range d.events {
		require.Equal(t, batch[i].ID, e.ID, "receive order")
		var data struct{ Order int }
		require.NoError(t, e.Decode(&data))
		require.Equal(t, i+1, data.Order)
	}
	require.Equal(t, batch[0].ID, d.event.ID, "c.Event() is the batch's first event")

	// The App answers paths it does not serve with a JSON 404.
	resp, err := http.Post(h.app.URL+"/wf/unknown", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	var body map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Contains(t, body["error"], "/wf/unknown")
}

// TestAppDefinition: the PUT /apps/{app} body derived from the definitions, and the
// definitions NewApp refuses.
func TestAppDefinition(t *testing.T) {
	t.Parallel()
	noop := func(*sdk.Context) (any, error) { return nil, nil }
	one := 1
	app, err := sdk.NewApp("docs", "https://docs.example.com/api/workflows", []sdk.Workflow{
		{Name: "index.documents", Triggers: []string{"doc.updated"}, Retries: &one, Handler: noop,
			Batch:       &sdk.Batch{MaxSize: 100, TimeoutMs: 5000, Key: "index"},
			Concurrency: []sdk.Concurrency{{Limit: 5, Key: "accountId"}}},
		{Name: "ts.route", URL: "https://ts.example.com/api/digest", Triggers: []string{"a", "b"},
			Singleton: &sdk.Singleton{Mode: "skip"}, Throttle: &sdk.Rate{Limit: 2, PerMs: 1000}},
	})
	require.NoError(t, err)
	require.Equal(t, "docs", app.Name())
	b, err := json.Marshal(app.Definition())
	require.NoError(t, err)
	require.JSONEq(t, `{"workflows":[
		{"name":"index.documents","url":"https://docs.example.com/api/workflows/index.documents",
		 "triggers":[{"event":"doc.updated"}],"retries":1,
		 "batch":{"maxSize":100,"timeoutMs":5000,"key":"index"},"concurrency":[{"limit":5,"key":"accountId"}]},
		{"name":"ts.route","url":"https://ts.example.com/api/digest","triggers":[{"event":"a"},{"event":"b"}],
		 "singleton":{"mode":"skip"},"throttle":{"limit":2,"perMs":1000}}]}`, string(b))

	for name, tc := range map[string]struct {
		app, base string
		wfs       []sdk.Workflow
		want      string
	}{
		"no app name":       {"", "https://x.test", []sdk.Workflow{{Name: "a", Handler: noop}}, "app name"},
		"no workflows":      {"x", "https://x.test", nil, "at least one workflow"},
		"relative base":     {"x", "/wf", []sdk.Workflow{{Name: "a", Handler: noop}}, "baseURL"},
		"bad name":          {"x", "https://x.test", []sdk.Workflow{{Name: "a/b", Handler: noop}}, "a/b"},
		"twice":             {"x", "https://x.test", []sdk.Workflow{{Name: "a", Handler: noop}, {Name: "a", Handler: noop}}, "defined twice"},
		"no handler or url": {"x", "https://x.test", []sdk.Workflow{{Name: "a"}}, "needs a Handler or a URL"},
		"no url to derive":  {"x", "", []sdk.Workflow{{Name: "a", Handler: noop}}, "no URL and no baseURL"},
		"same path":         {"x", "https://x.test", []sdk.Workflow{{Name: "a", Handler: noop}, {Name: "b", URL: "https://y.test/a", Handler: noop}}, "served by another workflow"},
	} {
		_, err := sdk.NewApp(tc.app, tc.base, tc.wfs)
		require.ErrorContains(t, err, tc.want, name)
	}
}

// TestSendEventWithoutData: an Event whose Data is nil is sent without data (the server
// takes a missing data as null) instead of as "data": null, which the server refuses.
func TestSendEventWithoutData(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	res, err := h.client.SendEvent(context.Background(), sdk.Event{Name: "ping.nodata"})
	require.NoError(t, err)
	require.NotEmpty(t, res.ID)
}

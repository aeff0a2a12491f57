package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/storage/pg/pgtest"
)

// Native workflows on three replicas: a workflow with concurrency {limit: 2}, served by
// the Go SDK, runs triggered through all three replicas.

const (
	nativeRuns  = 20
	nativeSteps = 3
	nativeLimit = 2
)

// nativeLoad is the SDK-served workflow and what its endpoint saw.
type nativeLoad struct {
	ep   *loadEndpoint // hits: one per delivery (run = Upstash-Workflow-Runid)
	mu   sync.Mutex
	runs map[string]map[string]int // run id → step name → times its function ran
}

// startNativeLoad serves workflow "conc" (app "replicas", event "job", concurrency
// limit 2): nativeSteps steps, each holding its delivery 30–60 ms. env is the SDK's
// QSTASH_* environment. Every delivery is recorded at the endpoint, [arrived, answered).
func startNativeLoad(t *testing.T, env []string) (*nativeLoad, *sdk.App) {
	t.Helper()
	nl := &nativeLoad{ep: &loadEndpoint{}, runs: map[string]map[string]int{}}
	route := func(c *sdk.Context) (any, error) {
		for i := 1; i <= nativeSteps; i++ {
			name := fmt.Sprintf("s%d", i)
			if _, err := sdk.Run(c, name, func() (int, error) {
				time.Sleep(30*time.Millisecond + rand.N(30*time.Millisecond))
				nl.mu.Lock()
				if nl.runs[c.RunID] == nil {
					nl.runs[c.RunID] = map[string]int{}
				}
				nl.runs[c.RunID][name]++
				nl.mu.Unlock()
				return i, nil
			}); err != nil {
				return nil, err
			}
		}
		return "done", nil
	}
	getenv := func(k string) string {
		for _, kv := range env {
			if name, v, ok := strings.Cut(kv, "="); ok && name == k {
				return v
			}
		}
		return ""
	}
	mux := http.NewServeMux()
	nl.ep.srv = httptest.NewServer(mux)
	t.Cleanup(nl.ep.srv.Close)
	app, err := sdk.NewApp("replicas", nl.ep.srv.URL+"/wf", []sdk.Workflow{{
		Name: "conc", Triggers: []string{"job"}, Handler: route,
		Concurrency: []sdk.Concurrency{{Limit: nativeLimit}},
	}}, sdk.WithServeEnv(getenv))
	require.NoError(t, err)
	mux.Handle("/wf/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := &hit{at: time.Now(), run: r.Header.Get("Upstash-Workflow-Runid")}
		nl.ep.mu.Lock()
		nl.ep.hits = append(nl.ep.hits, h)
		nl.ep.mu.Unlock()
		app.ServeHTTP(w, r)
		// Taken after the answer is written but before the handler returns, which is when
		// the server sends it: the replica cannot have seen the answer before end.
		nl.ep.mu.Lock()
		h.end, h.aborted = time.Now(), r.Context().Err() != nil
		nl.ep.mu.Unlock()
	}))
	return nl, app
}

// registerVia registers app through replica r.
func registerVia(t *testing.T, client *http.Client, r *replicaProc, app *sdk.App) {
	t.Helper()
	c, err := sdk.NewClient(sdk.WithBaseURL(r.URL), sdk.WithToken(r.Token), sdk.WithHTTPClient(client))
	require.NoError(t, err)
	_, err = c.RegisterApp(context.Background(), app)
	require.NoError(t, err, "register the app through %s", r.ID)
}

// triggerRuns sends n "job" events, event i through reps[i % len(reps)], one goroutine
// per replica, and returns the run ids.
func triggerRuns(t *testing.T, client *http.Client, reps []*replicaProc, n int) []string {
	t.Helper()
	var mu sync.Mutex
	var ids []string
	var errs []error
	var wg sync.WaitGroup
	for ri, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := sdk.NewClient(sdk.WithBaseURL(r.URL), sdk.WithToken(r.Token), sdk.WithHTTPClient(client))
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			for i := ri; i < n; i += len(reps) {
				res, err := c.SendEvent(context.Background(), sdk.Event{Name: "job", Data: map[string]int{"n": i}})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("event %d through %s: %w", i, r.ID, err))
				} else if run, ok := res.Run("conc"); !ok || !run.Started() {
					errs = append(errs, fmt.Errorf("event %d through %s started no run: %+v", i, r.ID, res))
				} else {
					ids = append(ids, run.RunID)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
	return ids
}

// nativeRun is GET /runs/{id}, the fields checked here.
type nativeRun struct {
	RunID  string
	Status string
	Steps  []struct{ Name, Type, Status string }
}

// waitRunsEnded polls every run through the replicas in turn until each has ended and
// returns them.
func waitRunsEnded(t *testing.T, client *http.Client, reps []*replicaProc, ids []string, timeout time.Duration) map[string]nativeRun {
	t.Helper()
	out := map[string]nativeRun{}
	deadline := time.Now().Add(timeout)
	for i := 0; len(out) < len(ids); i++ {
		for _, id := range ids {
			if _, done := out[id]; done {
				continue
			}
			r := reps[i%len(reps)]
			status, body, _ := getVia(t, client, r, "/runs/"+id)
			require.Equal(t, http.StatusOK, status, "GET /runs/%s through %s: %s", id, r.ID, body)
			var run nativeRun
			require.NoError(t, json.Unmarshal([]byte(body), &run), body)
			switch run.Status {
			case "succeeded", "failed", "cancelled":
				out[id] = run
			}
		}
		if len(out) < len(ids) {
			require.True(t, time.Now().Before(deadline), "only %d of %d runs ended within %s", len(out), len(ids), timeout)
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out
}

// checkRunsOnce asserts every run succeeded with each step recorded once, in order.
func checkRunsOnce(t *testing.T, runs map[string]nativeRun) {
	t.Helper()
	for id, run := range runs {
		require.Equal(t, "succeeded", run.Status, "run %s", id)
		var names []string
		for _, s := range run.Steps {
			if s.Type == "Run" || strings.HasPrefix(s.Name, "s") {
				names = append(names, s.Name)
			}
		}
		require.Equal(t, []string{"s1", "s2", "s3"}, names, "run %s: each step recorded once, in order: %+v", id, run.Steps)
	}
}

// TestReplicasNativeConcurrency: 20 runs of a workflow with concurrency {limit: 2},
// triggered through all three replicas: at most 2 of their deliveries are open at the
// endpoint at any moment, and every run succeeds with each step recorded (and run) once.
func TestReplicasNativeConcurrency(t *testing.T) {
	skipShortReplicas(t)
	t.Parallel()
	db := pgtest.Start(t).NewDatabase(t)
	creds := newReplicaCreds()
	reps, leader := startReplicas(t, db, creds, 3)
	f := followers(reps, leader)
	nl, app := startNativeLoad(t, f[1].Env())
	client := newAPIClient(t, 30*time.Second)
	registerVia(t, client, f[0], app)

	began := time.Now()
	ids := triggerRuns(t, client, reps, nativeRuns)
	runs := waitRunsEnded(t, client, reps, ids, 90*time.Second)
	t.Logf("%d runs of %d steps ended in %dms", len(ids), nativeSteps, time.Since(began).Milliseconds())
	hits := nl.ep.snapshot()
	timeline := hitTimeline(hits, nil)
	checkRunsOnce(t, runs)
	inflight, at := maxInFlight(hits)
	require.LessOrEqual(t, inflight, nativeLimit, "concurrency limit 2: %d deliveries open at +%dms\n%s", inflight, at.Sub(hits[0].at).Milliseconds(), timeline)
	require.Equal(t, nativeLimit, inflight, "the limit is used (else the check proves nothing)\n%s", timeline)
	nl.mu.Lock()
	defer nl.mu.Unlock()
	require.Len(t, nl.runs, nativeRuns)
	for id, steps := range nl.runs {
		require.Equal(t, map[string]int{"s1": 1, "s2": 1, "s3": 1}, steps, "run %s: no replica died, each step ran once", id)
	}
	t.Logf("%d deliveries; most open at once: %d", len(hits), inflight)
}

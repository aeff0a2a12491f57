package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
//
// The concurrency limit counts deliveries holding a slot. In the workflow protocol the
// SDK publishes a run's next step (an API call) before it answers the delivery that ran
// the step, so a run's next delivery may start while its previous one is still open;
// both hold a slot, and the limit is checked over all deliveries, not per run.

const (
	nativeRuns  = 20
	nativeSteps = 3
	nativeLimit = 2
)

// nativeLoad is the SDK-served workflow and what its endpoint saw.
type nativeLoad struct {
	ep    *loadEndpoint // hits: one per delivery (run = Upstash-Workflow-Runid)
	mu    sync.Mutex
	runs  map[string]map[string]int         // run id → step name → times its function ran
	execs map[string]map[string][]time.Time // run id → step name → when its function ran
}

// startNativeLoad serves workflow "conc" (app "replicas", event "job", concurrency
// limit 2): nativeSteps steps, each holding its delivery 30–60 ms. env is the SDK's
// QSTASH_* environment. Every delivery is recorded at the endpoint, [arrived, answered).
func startNativeLoad(t *testing.T, env []string) (*nativeLoad, *sdk.App) {
	t.Helper()
	nl := &nativeLoad{ep: &loadEndpoint{}, runs: map[string]map[string]int{}, execs: map[string]map[string][]time.Time{}}
	route := func(c *sdk.Context) (any, error) {
		for i := 1; i <= nativeSteps; i++ {
			name := fmt.Sprintf("s%d", i)
			if _, err := sdk.Run(c, name, func() (int, error) {
				began := time.Now()
				time.Sleep(30*time.Millisecond + rand.N(30*time.Millisecond))
				nl.mu.Lock()
				if nl.runs[c.RunID] == nil {
					nl.runs[c.RunID] = map[string]int{}
					nl.execs[c.RunID] = map[string][]time.Time{}
				}
				nl.runs[c.RunID][name]++
				nl.execs[c.RunID][name] = append(nl.execs[c.RunID][name], began)
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
		h := &hit{at: time.Now(), run: r.Header.Get("Upstash-Workflow-Runid"), msgID: r.Header.Get("Upstash-Message-Id"),
			retried: r.Header.Get("Upstash-Retried")}
		// The body is the run's history so far: its length says which step this delivery runs.
		if b, err := io.ReadAll(r.Body); err == nil {
			var history []json.RawMessage
			if json.Unmarshal(b, &history) == nil {
				h.body = fmt.Sprintf("history=%d", len(history))
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		nl.ep.mu.Lock()
		nl.ep.hits = append(nl.ep.hits, h)
		nl.ep.mu.Unlock()
		sw := &stampWriter{ResponseWriter: w, stamp: func() {
			nl.ep.mu.Lock()
			if h.end.IsZero() {
				h.end, h.aborted = time.Now(), r.Context().Err() != nil
			}
			nl.ep.mu.Unlock()
		}}
		app.ServeHTTP(sw, r)
		sw.stamp() // nothing written: the server answers 200 now
	}))
	return nl, app
}

// stampWriter calls stamp just before the answer's first byte is written: the replica
// cannot see the answer (and free the delivery's slot) before it.
type stampWriter struct {
	http.ResponseWriter
	stamp func()
}

func (s *stampWriter) WriteHeader(code int) { s.stamp(); s.ResponseWriter.WriteHeader(code) }

func (s *stampWriter) Write(b []byte) (int, error) { s.stamp(); return s.ResponseWriter.Write(b) }

// registerVia registers app through replica r.
func registerVia(t *testing.T, client *http.Client, r *replicaProc, app *sdk.App) {
	t.Helper()
	c, err := sdk.NewClient(sdk.WithBaseURL(r.URL), sdk.WithToken(r.Token), sdk.WithHTTPClient(client))
	require.NoError(t, err)
	_, err = c.RegisterApp(context.Background(), app)
	require.NoError(t, err, "register the app through %s", r.ID)
}

// triggerRuns sends n "job" events, event i through reps[i % len(reps)], one goroutine
// per replica, and returns the run ids; any failure fails the test.
func triggerRuns(t *testing.T, client *http.Client, reps []*replicaProc, n int) []string {
	t.Helper()
	ids, errs := sendJobs(client, reps, n)
	require.Empty(t, errs)
	return ids
}

// sendJobs is triggerRuns returning the failures (safe off the test's goroutine).
func sendJobs(client *http.Client, reps []*replicaProc, n int) ([]string, []error) {
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
	return ids, errs
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

// TestReplicasNativeLeaderKilled: the load of TestReplicasNativeConcurrency, more of it;
// the leader is SIGKILLed while a delivery is open and more runs are triggered through
// the followers during the takeover. Every acknowledged run succeeds with each step
// recorded once in its history (read through the followers). A step function runs at
// most twice, and then across the takeover: a delivery the dead leader had sent (open,
// or answered without the answer recorded) is sent again by the new leader. If the SDK
// had already published the next step, that step's delivery runs too, at the same time
// as the re-sent one (seen in this test): the re-run step's publish is refused as
// already recorded, so the history keeps it once. The same happens after a SIGKILL and
// restart of one bbolt process; it is the workflow protocol's at-least-once step
// execution, not something replicas add. The concurrency limit holds over every
// delivery the endpoint saw: the dead leader's requests end within a step's 60 ms of the
// kill (its sockets close with it), seconds before the new leader sends anything.
func TestReplicasNativeLeaderKilled(t *testing.T) {
	skipShortReplicas(t)
	t.Parallel()
	const runs, during = 30, 6
	db := pgtest.Start(t).NewDatabase(t)
	reps, leader := startReplicas(t, db, newReplicaCreds(), 3)
	f := followers(reps, leader)
	nl, app := startNativeLoad(t, f[1].Env())
	client := newAPIClient(t, 30*time.Second)
	registerVia(t, client, f[0], app)

	ids := triggerRuns(t, client, reps, runs)
	nl.ep.waitHits(t, "a delivery open after 30 answered", 60*time.Second, func(hs []hit) bool {
		answered := 0
		open := false
		for _, h := range hs {
			if !h.end.IsZero() {
				answered++
			} else if time.Since(h.at) < 20*time.Millisecond {
				open = true
			}
		}
		return answered >= 30 && open
	})
	oldEpoch := leader.epoch()
	killSent := time.Now()
	leader.Kill()
	killAt := time.Now() // the process is gone (Kill waits for it)
	type sent struct {
		ids  []string
		errs []error
	}
	more := make(chan sent, 1)
	go func() { // these wait through the takeover
		ids, errs := sendJobs(client, f, during)
		more <- sent{ids, errs}
	}()
	_, tookOverAt := waitLeader(t, f, oldEpoch+1, replicaTTL+replicaGrace+30*time.Second)
	takeover := tookOverAt.Sub(killSent)
	t.Logf("leader SIGKILLed; a follower leads %dms later (TTL %s + grace %s)", takeover.Milliseconds(), replicaTTL, replicaGrace)
	require.LessOrEqual(t, takeover, replicaTTL+replicaGrace+replicaTTL/5+time.Second)
	m := <-more
	require.Empty(t, m.errs, "events sent through the followers during the takeover wait and succeed")
	ids = append(ids, m.ids...)

	ended := waitRunsEnded(t, client, f, ids, 90*time.Second)
	time.Sleep(300 * time.Millisecond) // a wrong extra delivery right after the last would show here
	hits := nl.ep.snapshot()
	timeline := hitTimeline(hits, map[string]time.Time{"SIGKILL of the leader": killAt, "takeover": tookOverAt})
	checkRunsOnce(t, ended)

	// Deliveries the dead leader had open: sent again by the new leader.
	openAtKill := map[string]bool{}
	for _, h := range hits {
		if h.aborted || (h.at.Before(killAt) && (h.end.IsZero() || h.end.After(killSent))) {
			openAtKill[h.run] = true
		}
	}
	require.NotEmpty(t, openAtKill, "the kill came while a delivery was open\n%s", timeline)
	for run := range openAtKill {
		again := false
		for _, h := range hits {
			again = again || (h.run == run && h.at.After(tookOverAt.Add(-100*time.Millisecond)))
		}
		require.True(t, again, "run %s, open at the kill, is delivered again after the takeover\n%s", run, timeline)
	}
	// A step function runs again only across the takeover: its first run began before the
	// kill (the dead leader sent it, and may even have had its answer without recording
	// it), the second after the takeover.
	nl.mu.Lock()
	twice := 0
	for id, steps := range nl.execs {
		for name, ats := range steps {
			if len(ats) > 1 {
				twice++
				require.Len(t, ats, 2, "run %s step %s: at most once more after the takeover\n%s", id, name, timeline)
				require.True(t, ats[0].Before(killAt) && ats[1].After(tookOverAt.Add(-100*time.Millisecond)),
					"run %s step %s ran twice, at +%dms and +%dms: not across the takeover\n%s",
					id, name, ats[0].Sub(hits[0].at).Milliseconds(), ats[1].Sub(hits[0].at).Milliseconds(), timeline)
			}
		}
	}
	require.Len(t, nl.runs, runs+during, "every run ran")
	nl.mu.Unlock()

	inflight, at := maxInFlight(hits)
	require.LessOrEqual(t, inflight, nativeLimit, "concurrency limit 2: %d deliveries open at +%dms\n%s", inflight, at.Sub(hits[0].at).Milliseconds(), timeline)
	t.Logf("%d runs, %d deliveries; %d runs open at the kill; %d step functions ran twice; most deliveries open at once: %d",
		len(ids), len(hits), len(openAtKill), twice, inflight)
}

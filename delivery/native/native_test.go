package native

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const project = "p"

// endpoint is an in-process workflow endpoint: it records each delivery and answers as
// an SDK would (200 with Upstash-Workflow-Sdk-Version), without running steps.
type endpoint struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func (e *endpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	e.reqs = append(e.reqs, r)
	e.body = append(e.body, string(b))
	e.mu.Unlock()
	h := http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Header: h, Request: r}, nil
}

func (e *endpoint) got() ([]*http.Request, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*http.Request(nil), e.reqs...), append([]string(nil), e.body...)
}

type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

type node struct {
	store  *storage.Store
	engine *delivery.Engine
	svc    *Service
}

// open starts an engine and the native unit over the bbolt file in dir; every write runs
// twice, as the group committer may do.
func open(t testing.TB, dir string, ep *endpoint, c *clock) *node {
	return openWith(t, dir, ep, c, delivery.Config{SweepInterval: 24 * time.Hour})
}

// openWith is open with engine settings (the transport, clock and logger are set here).
func openWith(t testing.TB, dir string, ep *endpoint, c *clock, cfg delivery.Config) *node {
	store, err := storage.Open(filepath.Join(dir, "duraton.db"), storage.Options{})
	require.NoError(t, err)
	_, err = delivery.EnsureProject(t.Context(), store, delivery.Project{ID: project, CurrentSigningKey: "sig_a", NextSigningKey: "sig_b"}, "h")
	require.NoError(t, err)
	twice := storagetest.NewTwice(store)
	cfg.Transport, cfg.Now, cfg.Logger = ep, c.Now, slog.New(slog.DiscardHandler)
	e, err := delivery.New(cfg, twice)
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	svc, err := New(Config{CheckURL: func(raw string) (*url.URL, error) { return url.Parse(raw) }}, twice, e)
	require.NoError(t, err)
	return &node{store: store, engine: e, svc: svc}
}

func (n *node) close(t testing.TB) {
	n.engine.Stop()
	require.NoError(t, n.store.Close())
}

// tb is what the helpers need of a test (*testing.T or *rapid.T).
type tb interface {
	require.TestingT
	Helper()
}

func (n *node) register(t tb, app, body string) {
	t.Helper()
	defs, err := n.svc.ParseApp(app, []byte(body))
	require.NoError(t, err)
	_, err = n.svc.PutApp(context.Background(), project, app, defs)
	require.NoError(t, err)
}

func (n *node) send(t tb, events ...EventIn) []EventResult {
	t.Helper()
	res, err := n.svc.SendEvents(context.Background(), project, events)
	require.NoError(t, err)
	return res
}

func ev(name, data, dedupe string) EventIn {
	return EventIn{Name: name, Data: json.RawMessage(data), DedupeID: dedupe}
}

// TestRestartKeepsFlowState: definitions, rateLimit and idempotency states and event
// dedupeIds are in the data file: after a restart they still refuse what they refused.
func TestRestartKeepsFlowState(t *testing.T) {
	dir := t.TempDir()
	ep := &endpoint{}
	c := &clock{}
	c.ns.Store(time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	n := open(t, dir, ep, c)
	n.register(t, "app", `{"workflows": [
		{"name": "limited", "url": "http://x.test/limited", "triggers": [{"event": "e"}], "rateLimit": {"limit": 1, "perMs": 3600000, "key": "user"}},
		{"name": "once", "url": "http://x.test/once", "triggers": [{"event": "e"}], "idempotency": {"key": "order"}}]}`)
	first := n.send(t, ev("e", `{"user": "a", "order": 1}`, "d1"))
	require.Len(t, first[0].Runs, 2)
	require.NotEmpty(t, first[0].Runs[0].RunID)
	require.NotEmpty(t, first[0].Runs[1].RunID)

	// The run's first delivery: the history [initial], the event as initial payload, and
	// the headers a workflow SDK needs.
	var reqs []*http.Request
	var bodies []string
	require.Eventually(t, func() bool { reqs, bodies = ep.got(); return len(reqs) >= 2 }, 10*time.Second, time.Millisecond)
	for i, r := range reqs[:2] {
		require.Equal(t, "1", r.Header.Get("Upstash-Workflow-Sdk-Version"))
		require.Equal(t, "app", r.Header.Get("Duraton-App"))
		wf := strings.TrimPrefix(r.URL.Path, "/")
		require.Equal(t, wf, r.Header.Get("Duraton-Workflow"))
		var hist []struct{ Body string }
		require.NoError(t, json.Unmarshal([]byte(bodies[i]), &hist), bodies[i])
		require.Len(t, hist, 1)
		payload, err := base64.StdEncoding.DecodeString(hist[0].Body)
		require.NoError(t, err)
		ts := c.Now().UnixMilli()
		require.JSONEq(t, fmt.Sprintf(`{"id": %[1]q, "name": "e", "data": {"user": "a", "order": 1}, "ts": %[2]d,
			"events": [{"id": %[1]q, "name": "e", "data": {"user": "a", "order": 1}, "ts": %[2]d}]}`, first[0].ID, ts), string(payload))
		runID := ""
		for _, er := range first[0].Runs {
			if er.Workflow == wf {
				runID = er.RunID
			}
		}
		require.Equal(t, runID, r.Header.Get("Upstash-Workflow-Runid"))
	}
	n.close(t)

	c.Advance(time.Minute)
	n = open(t, dir, ep, c)
	defer n.close(t)
	defs, err := n.svc.Workflows(t.Context(), project, "")
	require.NoError(t, err)
	require.Len(t, defs, 2)
	again := n.send(t, ev("e", `{"user": "a", "order": 1}`, "d1"), ev("e", `{"user": "a", "order": 1}`, ""), ev("e", `{"user": "b", "order": 2}`, ""))
	require.Equal(t, EventResult{ID: first[0].ID, Deduped: true, Runs: []EventRun{}}, again[0], "the dedupeId survived the restart")
	require.Equal(t, []EventRun{{Workflow: "limited", Dropped: true}, {Workflow: "once", Deduped: true}}, again[1].Runs,
		"the rate state and the idempotency window survived the restart")
	require.NotEmpty(t, again[2].Runs[0].RunID)
	require.NotEmpty(t, again[2].Runs[1].RunID)
}

// TestGatePipelineProperty: random events, keys and arrival times through rateLimit and
// idempotency: every event has exactly one outcome per matching workflow, every run
// exists, no rate is exceeded, no idempotency window holds two runs, and a deduplicated
// event always has a run of its key in the window before it.
func TestGatePipelineProperty(t *testing.T) {
	ep := &endpoint{}
	c := &clock{}
	c.ns.Store(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	n := open(t, t.TempDir(), ep, c)
	defer n.close(t)
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		limit := rapid.IntRange(1, 4).Draw(rt, "limit")
		perMs := rapid.Int64Range(1000, 10_000).Draw(rt, "perMs")
		idemMs := rapid.Int64Range(1000, 10_000).Draw(rt, "idemMs")
		event := fmt.Sprintf("e%d", round)
		n.register(rt, fmt.Sprintf("app%d", round), fmt.Sprintf(`{"workflows": [
			{"name": "rate%[1]d", "url": "http://x.test/r", "triggers": [{"event": %[2]q}], "rateLimit": {"limit": %[3]d, "perMs": %[4]d, "key": "user"}},
			{"name": "idem%[1]d", "url": "http://x.test/i", "triggers": [{"event": %[2]q}], "idempotency": {"key": "order", "periodMs": %[5]d}},
			{"name": "both%[1]d", "url": "http://x.test/b", "triggers": [{"event": %[2]q}], "rateLimit": {"limit": %[3]d, "perMs": %[4]d}, "idempotency": {"key": "order", "periodMs": %[5]d}}]}`,
			round, event, limit, perMs, idemMs))
		type start struct {
			at    time.Time
			key   string
			order string
		}
		runs := map[string][]start{}
		deduped := map[string][]start{}
		count := rapid.IntRange(1, 25).Draw(rt, "events")
		for i := range count {
			c.Advance(time.Duration(rapid.Int64Range(0, perMs).Draw(rt, "gapMs")) * time.Millisecond)
			user := rapid.SampledFrom([]string{`"a"`, `"b"`, `1`, `null`, ``}).Draw(rt, "user")
			order := rapid.SampledFrom([]string{`1`, `2`, `"1"`, ``}).Draw(rt, "order")
			var fields []string
			if user != "" {
				fields = append(fields, `"user": `+user)
			}
			if order != "" {
				fields = append(fields, `"order": `+order)
			}
			data := "{" + strings.Join(fields, ", ") + "}"
			batch := rapid.IntRange(1, 3).Draw(rt, "batch")
			var in []EventIn
			for range batch {
				in = append(in, ev(event, data, ""))
			}
			res := n.send(rt, in...)
			require.Len(rt, res, batch)
			for _, r := range res {
				require.Len(rt, r.Runs, 3, "event %d: one outcome per matching workflow", i)
				for _, er := range r.Runs {
					set := 0
					for _, b := range []bool{er.RunID != "", er.Dropped, er.Deduped, er.Skipped, er.Debounced, er.Batched} {
						if b {
							set++
						}
					}
					require.Equal(rt, 1, set, "exactly one outcome: %+v", er)
					ukey, _ := flowctl.ResolveKey(json.RawMessage(data), "user")
					okey, _ := flowctl.ResolveKey(json.RawMessage(data), "order")
					s := start{at: c.Now(), key: ukey, order: okey}
					if strings.HasPrefix(er.Workflow, "both") {
						s.key = ""
					}
					switch {
					case er.RunID != "":
						runs[er.Workflow] = append(runs[er.Workflow], s)
						require.NoError(rt, n.store.View(func(tx *storage.Tx) error { _, err := tx.Run(project, er.RunID); return err }), "the run exists")
					case er.Deduped:
						deduped[er.Workflow] = append(deduped[er.Workflow], s)
					}
				}
			}
		}
		step := time.Duration(perMs) * time.Millisecond / time.Duration(limit)
		window := time.Duration(idemMs) * time.Millisecond
		for wf, ss := range runs {
			if !strings.HasPrefix(wf, "idem") { // rate bound per key
				for i, a := range ss {
					in := 0
					for _, b := range ss[i:] {
						if b.key == a.key {
							in++
							require.LessOrEqual(rt, in, limit+int(b.at.Sub(a.at)/step), "%s key %s", wf, a.key)
						}
					}
				}
			}
			if !strings.HasPrefix(wf, "rate") { // one run per order per window
				last := map[string]time.Time{}
				for _, s := range ss {
					if at, ok := last[s.order]; ok {
						require.GreaterOrEqual(rt, s.at.Sub(at), window, "%s order %s", wf, s.order)
					}
					last[s.order] = s.at
				}
				for _, d := range deduped[wf] {
					found := false
					for _, s := range ss {
						if s.order == d.order && !s.at.After(d.at) && d.at.Sub(s.at) < window {
							found = true
						}
					}
					require.True(rt, found, "%s: a deduplicated event of order %s has a run in its window", wf, d.order)
				}
			}
		}
	})
}

// TestSweepRemovesExpiredFlowState: the engine's retention sweeper removes gate states
// once they no longer matter and events older than the log retention; live ones stay.
func TestSweepRemovesExpiredFlowState(t *testing.T) {
	ep := &endpoint{}
	c := &clock{}
	c.ns.Store(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	n := openWith(t, t.TempDir(), ep, c, delivery.Config{SweepInterval: time.Millisecond, LogRetention: time.Hour})
	defer n.close(t)
	n.register(t, "app", `{"workflows": [{"name": "wf", "url": "http://x.test/wf", "triggers": [{"event": "e"}],
		"rateLimit": {"limit": 1, "perMs": 60000, "key": "user"}, "idempotency": {"key": "order", "periodMs": 7200000}}]}`)
	old := n.send(t, ev("e", `{"user": "a", "order": 1}`, ""))
	require.NotEmpty(t, old[0].Runs[0].RunID)
	c.Advance(61 * time.Minute)
	recent := n.send(t, ev("e", `{"user": "b", "order": 2}`, ""))
	require.NotEmpty(t, recent[0].Runs[0].RunID)

	gates := func() []string {
		var keys []string
		require.NoError(t, n.store.View(func(tx *storage.Tx) error {
			for _, k := range []string{gateKey("wf", "rateLimit", `"a"`), gateKey("wf", "rateLimit", `"b"`),
				gateKey("wf", "idempotency", "1"), gateKey("wf", "idempotency", "2")} {
				if _, err := tx.Gate(project, k); err == nil {
					keys = append(keys, strings.ReplaceAll(k, "\x00", "/"))
				}
			}
			return nil
		}))
		return keys
	}
	require.Eventually(t, func() bool {
		_, err := n.svc.Event(t.Context(), project, old[0].ID)
		return errors.Is(err, ErrNotFound) && len(gates()) == 3
	}, 10*time.Second, time.Millisecond, "the event past the retention and user a's idle rate state go")
	require.ElementsMatch(t, []string{"wf/rateLimit/\"b\"", "wf/idempotency/1", "wf/idempotency/2"}, gates())
	_, err := n.svc.Event(t.Context(), project, recent[0].ID)
	require.NoError(t, err, "the recent event stays")
	// The idempotency window of order 1 still refuses it; after the window it is gone.
	again := n.send(t, ev("e", `{"user": "c", "order": 1}`, ""))
	require.True(t, again[0].Runs[0].Deduped)
	c.Advance(time.Hour)
	require.Eventually(t, func() bool { return len(gates()) == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{"wf/idempotency/2"}, gates())
}

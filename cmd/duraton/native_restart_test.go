package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// nativeDelivery is one request a native workflow endpoint received.
type nativeDelivery struct {
	workflow, runID, eventID string
}

// nativeEndpoint records native deliveries; until open is closed it holds every
// request open (so no run gets past its first delivery before the crash).
type nativeEndpoint struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []nativeDelivery
	open chan struct{}
	once sync.Once
}

func newNativeEndpoint(t *testing.T) *nativeEndpoint {
	ep := &nativeEndpoint{open: make(chan struct{})}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Upstash-Workflow-Is-Failure") == "true" {
			return // the failure callback of a run this plain endpoint did not run as a workflow
		}
		// Every delivery carries the run's history; its first entry is the event.
		var history []struct{ Body []byte }
		var p struct{ ID string }
		if json.Unmarshal(b, &history) == nil && len(history) > 0 {
			_ = json.Unmarshal(history[0].Body, &p)
		}
		ep.mu.Lock()
		ep.seen = append(ep.seen, nativeDelivery{workflow: r.Header.Get("Duraton-Workflow"), runID: r.Header.Get("Upstash-Workflow-Runid"), eventID: p.ID})
		ep.mu.Unlock()
		select {
		case <-ep.open:
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(ep.srv.Close)
	t.Cleanup(ep.release) // before Close (cleanups run last-in first-out)
	return ep
}

func (ep *nativeEndpoint) release() { ep.once.Do(func() { close(ep.open) }) }

func (ep *nativeEndpoint) snapshot() []nativeDelivery {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]nativeDelivery(nil), ep.seen...)
}

// nativeCall sends a JSON request to a duraton process and returns status and body.
func nativeCall(t *testing.T, client *http.Client, p *proc, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := p.apiRequest(context.Background(), method, path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, raw
}

type nativeEventAnswer struct {
	ID      string
	Deduped bool
	Runs    []struct {
		Workflow, RunID, HolderRunID string
		Dropped, Deduped, Skipped    bool
	}
}

func sendNative(t *testing.T, client *http.Client, p *proc, body string) []nativeEventAnswer {
	t.Helper()
	status, raw := nativeCall(t, client, p, http.MethodPost, "/events", body)
	require.Equal(t, http.StatusOK, status, "POST /events: %s", raw)
	var out struct{ Events []nativeEventAnswer }
	require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	return out.Events
}

// TestNativeEventsSurviveSIGKILL: events answered before a SIGKILL start their runs
// after the restart, one run per event and workflow (a run interrupted in flight is
// sent again as the same run, never a second one); definitions, rateLimit and
// idempotency states and event dedupeIds survive.
func TestNativeEventsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	const events = 30
	ep := newNativeEndpoint(t)
	addr := freeLoopbackAddr(t)
	dataDir := t.TempDir()
	p1 := startDuratonAddr(t, dataDir, addr)
	client := newAPIClient(t, 10*time.Second)

	status, raw := nativeCall(t, client, p1, http.MethodPut, "/apps/shop", fmt.Sprintf(`{"workflows": [
		{"name": "fan.a", "url": %q, "triggers": [{"event": "order"}], "rateLimit": {"limit": 1, "perMs": 3600000, "key": "user"}},
		{"name": "fan.b", "url": %q, "triggers": [{"event": "order"}], "idempotency": {"key": "user"}}]}`,
		ep.srv.URL+"/a", ep.srv.URL+"/b"))
	require.Equal(t, http.StatusOK, status, "%s", raw)

	// Acknowledged events: each admitted by both workflows (distinct users).
	want := map[[2]string]string{} // (event id, workflow) → run id
	firstOf := map[string]string{} // dedupeId → event id
	for i := 0; i < events; i += 10 {
		var b strings.Builder
		b.WriteString("[")
		for j := i; j < i+10; j++ {
			if j > i {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"name": "order", "data": {"user": "u%d"}, "dedupeId": "d%d"}`, j, j)
		}
		b.WriteString("]")
		for j, ev := range sendNative(t, client, p1, b.String()) {
			require.Len(t, ev.Runs, 2, "%+v", ev)
			for _, r := range ev.Runs {
				require.NotEmpty(t, r.RunID, "%+v", ev)
				want[[2]string{ev.ID, r.Workflow}] = r.RunID
			}
			firstOf[fmt.Sprintf("d%d", i+j)] = ev.ID
		}
	}
	p1.Kill()
	before := len(ep.snapshot())
	t.Logf("SIGKILLed with %d of %d first deliveries in flight", before, len(want))

	p2 := startDuratonAddr(t, dataDir, addr)
	ep.release()

	// Every acknowledged (event, workflow) reaches the endpoint, as its one run.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[[2]string]bool{}
		for _, d := range ep.snapshot() {
			if d.eventID != "" {
				got[[2]string{d.eventID, d.workflow}] = true
			}
		}
		if len(got) >= len(want) {
			break
		}
		require.True(t, time.Now().Before(deadline), "timed out: %d of %d runs delivered after the restart", len(got), len(want))
		time.Sleep(20 * time.Millisecond)
	}
	runsOf := map[[2]string]map[string]bool{}
	for _, d := range ep.snapshot() {
		k := [2]string{d.eventID, d.workflow}
		require.NotEmpty(t, d.eventID, "a delivery without its event: %+v", d)
		if runsOf[k] == nil {
			runsOf[k] = map[string]bool{}
		}
		runsOf[k][d.runID] = true
	}
	require.Len(t, runsOf, len(want), "no delivery for an event nobody sent")
	for k, runID := range want {
		require.Equal(t, map[string]bool{runID: true}, runsOf[k], "event %s workflow %s: exactly its acknowledged run", k[0], k[1])
	}

	// The runs API agrees: one run per event and workflow, none extra.
	status, raw = nativeCall(t, client, p2, http.MethodGet, "/runs?limit=1000", "")
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var list struct {
		Runs []struct {
			RunID, Workflow string
			EventIDs        []string
		}
	}
	require.NoError(t, json.Unmarshal(raw, &list))
	require.Len(t, list.Runs, len(want))
	for _, r := range list.Runs {
		require.Len(t, r.EventIDs, 1)
		require.Equal(t, want[[2]string{r.EventIDs[0], r.Workflow}], r.RunID)
	}

	// Definitions and gate states survived.
	status, raw = nativeCall(t, client, p2, http.MethodGet, "/workflows", "")
	require.Equal(t, http.StatusOK, status, "%s", raw)
	require.Contains(t, string(raw), `"fan.a"`)
	require.Contains(t, string(raw), `"rateLimit":{"limit":1,"perMs":3600000,"key":"user"}`)
	again := sendNative(t, client, p2, `{"name": "order", "data": {"user": "u7"}}`)[0]
	require.Len(t, again.Runs, 2)
	for _, r := range again.Runs {
		switch r.Workflow {
		case "fan.a":
			require.True(t, r.Dropped, "u7's rate was spent before the crash: %+v", r)
		case "fan.b":
			require.True(t, r.Deduped, "u7's idempotency window opened before the crash: %+v", r)
		}
		require.Empty(t, r.RunID)
	}
	dup := sendNative(t, client, p2, `{"name": "order", "data": {"user": "fresh"}, "dedupeId": "d12"}`)[0]
	require.True(t, dup.Deduped)
	require.Equal(t, firstOf["d12"], dup.ID)
	fresh := sendNative(t, client, p2, `{"name": "order", "data": {"user": "fresh"}}`)[0]
	for _, r := range fresh.Runs {
		require.NotEmpty(t, r.RunID, "a new user starts runs: %+v", r)
	}
	status, raw = nativeCall(t, client, p2, http.MethodGet, "/flow-state", "")
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var fs struct {
		RateLimit   []struct{ Keys, Limited int }
		Idempotency []struct{ Keys int }
	}
	require.NoError(t, json.Unmarshal(raw, &fs))
	require.Equal(t, events+1, fs.RateLimit[0].Keys)
	require.Equal(t, events+1, fs.RateLimit[0].Limited)
	require.Equal(t, events+1, fs.Idempotency[0].Keys)
}

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNativeDelayedEventSurvivesSIGKILL: an event sent with delay "3s" is acknowledged at
// once; the server is SIGKILLed before it is due and restarted; the event still starts
// its run, once, no earlier than 3 s after it was acknowledged, and GET /events/{id}
// shows its time and then its run.
func TestNativeDelayedEventSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	var (
		mu   sync.Mutex
		seen []time.Time
		runs = map[string]bool{}
	)
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upstash-Workflow-Is-Failure") == "true" {
			return
		}
		mu.Lock()
		if id := r.Header.Get("Upstash-Workflow-Runid"); !runs[id] {
			runs[id] = true
			seen = append(seen, time.Now())
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(ep.Close)
	addr := freeLoopbackAddr(t)
	dataDir := t.TempDir()
	p1 := startDuratonAddr(t, dataDir, addr)
	client := newAPIClient(t, 10*time.Second)
	status, raw := nativeCall(t, client, p1, http.MethodPut, "/apps/later",
		fmt.Sprintf(`{"workflows": [{"name": "remind", "url": %q, "triggers": [{"event": "remind"}]}]}`, ep.URL))
	require.Equal(t, http.StatusOK, status, "%s", raw)

	sent := time.Now()
	status, raw = nativeCall(t, client, p1, http.MethodPost, "/events", `{"name": "remind", "data": {"who": "a"}, "delay": "3s"}`)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var ans struct {
		Events []struct {
			ID           string
			ScheduledFor int64
			Runs         []json.RawMessage
		}
	}
	require.NoError(t, json.Unmarshal(raw, &ans), "%s", raw)
	require.Len(t, ans.Events, 1)
	ev := ans.Events[0]
	require.Empty(t, ev.Runs)
	require.InDelta(t, sent.Add(3*time.Second).UnixMilli(), ev.ScheduledFor, 2000, "scheduledFor is 3 s after the request")
	p1.Kill()

	p2 := startDuratonAddr(t, dataDir, addr)
	status, raw = nativeCall(t, client, p2, http.MethodGet, "/events/"+ev.ID, "")
	require.Equal(t, http.StatusOK, status, "%s", raw)
	require.Contains(t, string(raw), fmt.Sprintf(`"scheduledFor":%d`, ev.ScheduledFor))

	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the delayed event never started its run")
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // room for a wrong second run
	mu.Lock()
	got := append([]time.Time(nil), seen...)
	mu.Unlock()
	require.Len(t, got, 1, "one run")
	require.GreaterOrEqual(t, got[0].UnixMilli(), ev.ScheduledFor, "not before its time")
	require.GreaterOrEqual(t, got[0].Sub(sent), 3*time.Second-5*time.Millisecond)

	status, raw = nativeCall(t, client, p2, http.MethodGet, "/events/"+ev.ID, "")
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var after struct {
		Pending bool
		Runs    []struct{ Workflow, RunID string }
	}
	require.NoError(t, json.Unmarshal(raw, &after))
	require.False(t, after.Pending)
	require.Len(t, after.Runs, 1)
	require.Equal(t, "remind", after.Runs[0].Workflow)
	require.NotEmpty(t, after.Runs[0].RunID)
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The gates that hold state over time (debounce and batch buffers, the singleton holder, a
// throttle's schedule) across a SIGKILL of a real duraton process and a restart on the same
// data directory and port.

// gateDelivery is one request a native workflow endpoint received, with the event payload
// of the run (the first entry of the history every delivery carries).
type gateDelivery struct {
	at       time.Time
	workflow string
	runID    string
	payload  struct {
		ID     string
		Name   string
		Data   map[string]any
		Events []struct {
			ID   string
			Name string
			Data map[string]any
		}
	}
}

// gateEndpoint records every delivery; held workflows keep their requests open until
// release is closed or duraton goes away.
type gateEndpoint struct {
	srv     *httptest.Server
	held    map[string]bool
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	seen    []gateDelivery
}

func newGateEndpoint(t *testing.T, held ...string) *gateEndpoint {
	t.Helper()
	ep := &gateEndpoint{held: map[string]bool{}, release: make(chan struct{})}
	for _, w := range held {
		ep.held[w] = true
	}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := gateDelivery{at: time.Now(), workflow: r.Header.Get("Duraton-Workflow"), runID: r.Header.Get("Upstash-Workflow-Runid")}
		b, err := io.ReadAll(r.Body)
		if err != nil || r.Header.Get("Upstash-Workflow-Is-Failure") == "true" {
			return
		}
		var history []struct{ Body []byte }
		if json.Unmarshal(b, &history) == nil && len(history) > 0 {
			_ = json.Unmarshal(history[0].Body, &d.payload)
		}
		ep.mu.Lock()
		ep.seen = append(ep.seen, d)
		ep.mu.Unlock()
		if ep.held[d.workflow] {
			select {
			case <-ep.release:
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(ep.srv.Close)
	t.Cleanup(func() { ep.once.Do(func() { close(ep.release) }) })
	return ep
}

// firsts returns the first delivery of each run of workflow, in arrival order.
func (ep *gateEndpoint) firsts(workflow string) []gateDelivery {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var out []gateDelivery
	runs := map[string]bool{}
	for _, d := range ep.seen {
		if d.workflow == workflow && !runs[d.runID] {
			runs[d.runID] = true
			out = append(out, d)
		}
	}
	return out
}

// waitRuns polls until workflow's runs reached the endpoint n times (distinct runs).
func (ep *gateEndpoint) waitRuns(t *testing.T, workflow string, n int, timeout time.Duration) []gateDelivery {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := ep.firsts(workflow)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %d of %d runs of %s reached the endpoint", timeout, len(got), n, workflow)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventData renders the data of the events of a delivery's payload as "k:n" strings.
func (d gateDelivery) eventData() []string {
	var out []string
	for _, e := range d.payload.Events {
		out = append(out, fmt.Sprintf("%v:%v", e.Data["k"], e.Data["n"]))
	}
	return out
}

type flowStateAnswer struct {
	Debounce []struct {
		Workflow string
		Pending  int
	}
	Batch []struct {
		Workflow string
		Buffered int
	}
}

func readFlowState(t *testing.T, client *http.Client, p *proc) flowStateAnswer {
	t.Helper()
	status, raw := nativeCall(t, client, p, http.MethodGet, "/flow-state", "")
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var fs flowStateAnswer
	require.NoError(t, json.Unmarshal(raw, &fs), "%s", raw)
	return fs
}

// backlog sums the debounce keys pending and the batch events buffered.
func (fs flowStateAnswer) backlog() (pending, buffered int) {
	for _, d := range fs.Debounce {
		pending += d.Pending
	}
	for _, b := range fs.Batch {
		buffered += b.Buffered
	}
	return pending, buffered
}

// TestNativeBuffersAndSingletonSurviveSIGKILL: debounce and batch buffers whose deadlines
// pass while duraton is down fire once after the restart, each with its events (debounce:
// the last of the burst; batch: all, in receive order), per key; a singleton holder
// (mode skip) still blocks its key after the restart.
func TestNativeBuffersAndSingletonSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	const period = 2 * time.Second // debounce periodMs and batch timeoutMs
	ep := newGateEndpoint(t, "solo")
	addr := freeLoopbackAddr(t)
	dataDir := t.TempDir()
	p1 := startDuratonAddr(t, dataDir, addr)
	client := newAPIClient(t, 10*time.Second)

	status, raw := nativeCall(t, client, p1, http.MethodPut, "/apps/gates", fmt.Sprintf(`{"workflows": [
		{"name": "deb", "url": %q, "triggers": [{"event": "deb"}], "debounce": {"periodMs": %d, "key": "k"}},
		{"name": "bat", "url": %q, "triggers": [{"event": "bat"}], "batch": {"maxSize": 10, "timeoutMs": %d, "key": "k"}},
		{"name": "solo", "url": %q, "triggers": [{"event": "solo"}], "singleton": {"key": "user", "mode": "skip"}}]}`,
		ep.srv.URL+"/deb", period.Milliseconds(), ep.srv.URL+"/bat", period.Milliseconds(), ep.srv.URL+"/solo"))
	require.Equal(t, http.StatusOK, status, "%s", raw)

	// The singleton holder: its delivery is held open, so its run stays live.
	holder := sendNative(t, client, p1, `{"name": "solo", "data": {"user": "s"}}`)[0].Runs[0]
	require.NotEmpty(t, holder.RunID, "%+v", holder)
	ep.waitRuns(t, "solo", 1, 10*time.Second)
	skipped := sendNative(t, client, p1, `{"name": "solo", "data": {"user": "s"}}`)[0].Runs[0]
	require.True(t, skipped.Skipped, "skip mode before the crash: %+v", skipped)
	require.Equal(t, holder.RunID, skipped.HolderRunID)

	// Three requests: debounce keys a (3 events) and b (2), batch keys a (3) and b (1).
	var lastSend time.Time
	for _, body := range []string{
		`[{"name": "deb", "data": {"k": "a", "n": 1}}, {"name": "deb", "data": {"k": "b", "n": 1}},
		  {"name": "bat", "data": {"k": "a", "n": 1}}, {"name": "bat", "data": {"k": "b", "n": 1}}]`,
		`[{"name": "bat", "data": {"k": "a", "n": 2}}, {"name": "deb", "data": {"k": "a", "n": 2}}]`,
		`[{"name": "deb", "data": {"k": "a", "n": 3}}, {"name": "bat", "data": {"k": "a", "n": 3}}, {"name": "deb", "data": {"k": "b", "n": 2}}]`,
	} {
		for _, ev := range sendNative(t, client, p1, body) {
			require.Len(t, ev.Runs, 1, "%+v", ev)
			require.Empty(t, ev.Runs[0].RunID, "held in a buffer, no run yet: %+v", ev)
		}
		lastSend = time.Now()
	}
	pending, buffered := readFlowState(t, client, p1).backlog()
	require.Equal(t, 2, pending, "debounce keys a and b pending before the crash")
	require.Equal(t, 4, buffered, "batch events buffered before the crash")
	p1.Kill()
	killAt := time.Now()
	require.Empty(t, ep.firsts("deb"), "no debounce fired before the crash")
	require.Empty(t, ep.firsts("bat"), "no batch fired before the crash")

	// Every deadline (the latest: the last debounce event + period) passes while down.
	time.Sleep(time.Until(lastSend.Add(period + 200*time.Millisecond)))
	p2 := startDuratonAddr(t, dataDir, addr)
	restartAt := time.Now()
	// Let the held holder answer before p2 is stopped (cleanups run last-in first-out), so
	// the graceful stop does not wait for it.
	t.Cleanup(func() { ep.once.Do(func() { close(ep.release) }) })
	t.Logf("down for %dms; restarted %dms after the last deadline", restartAt.Sub(killAt).Milliseconds(), restartAt.Sub(lastSend.Add(period)).Milliseconds())

	deb := ep.waitRuns(t, "deb", 2, 10*time.Second)
	bat := ep.waitRuns(t, "bat", 2, 10*time.Second)
	// Nothing is left to fire: the backlogs are empty and the runs API lists exactly these.
	pending, buffered = readFlowState(t, client, p2).backlog()
	require.Zero(t, pending, "debounce backlog after the flush")
	require.Zero(t, buffered, "batch backlog after the flush")
	for wf, n := range map[string]int{"deb": 2, "bat": 2} {
		status, raw := nativeCall(t, client, p2, http.MethodGet, "/runs?workflow="+wf, "")
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var list struct{ Runs []struct{ RunID string } }
		require.NoError(t, json.Unmarshal(raw, &list), "%s", raw)
		require.Len(t, list.Runs, n, "%s fired once per key: %s", wf, raw)
	}
	require.Len(t, ep.firsts("deb"), 2, "one debounce run per key")
	require.Len(t, ep.firsts("bat"), 2, "one batch run per key")
	var lastFire time.Time
	for _, d := range append(deb, bat...) {
		if d.at.After(lastFire) {
			lastFire = d.at
		}
	}
	t.Logf("all four buffers fired within %dms of the restart", lastFire.Sub(restartAt).Milliseconds())

	byKey := func(ds []gateDelivery) map[string][]string {
		out := map[string][]string{}
		for _, d := range ds {
			out[fmt.Sprint(d.payload.Data["k"])] = d.eventData()
		}
		return out
	}
	require.Equal(t, map[string][]string{"a": {"a:3"}, "b": {"b:2"}}, byKey(deb), "debounce: the last event of each key's burst")
	require.Equal(t, map[string][]string{"a": {"a:1", "a:2", "a:3"}, "b": {"b:1"}}, byKey(bat), "batch: every event of each key, in receive order")
	for _, d := range append(deb, bat...) {
		require.True(t, d.at.After(restartAt), "fired after the restart")
	}

	// The holder is still live after the restart: skip mode still refuses its key.
	again := sendNative(t, client, p2, `{"name": "solo", "data": {"user": "s"}}`)[0].Runs[0]
	require.True(t, again.Skipped, "the singleton holder still blocks after the restart: %+v", again)
	require.Equal(t, holder.RunID, again.HolderRunID)
	other := sendNative(t, client, p2, `{"name": "solo", "data": {"user": "other"}}`)[0].Runs[0]
	require.NotEmpty(t, other.RunID, "another key is not blocked: %+v", other)
	for _, d := range ep.firsts("solo") {
		require.Contains(t, []string{holder.RunID, other.RunID}, d.runID, "no skipped event started a run")
	}
}

// TestNativeThrottleSurvivesSIGKILL: one key under throttle 2 per 3 s (burst 2, then one
// every 1.5 s). 3 runs are created, duraton is SIGKILLed after the burst started and
// restarted at once, then 2 more runs are created: the delayed third run and the new ones
// keep the pace (no burst after the restart). Every pair of starts i < j satisfies
// start[j]-start[i] >= (j-i-(limit-1))·interval, the GCRA's bound.
func TestNativeThrottleSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	const (
		limit     = 2
		per       = 3 * time.Second
		interval  = per / limit
		total     = 5
		tolerance = 150 * time.Millisecond // the endpoint sees a start a little after duraton makes it
	)
	ep := newGateEndpoint(t)
	addr := freeLoopbackAddr(t)
	dataDir := t.TempDir()
	p1 := startDuratonAddr(t, dataDir, addr)
	client := newAPIClient(t, 10*time.Second)

	status, raw := nativeCall(t, client, p1, http.MethodPut, "/apps/paced", fmt.Sprintf(`{"workflows": [
		{"name": "thr", "url": %q, "triggers": [{"event": "thr"}], "throttle": {"limit": %d, "perMs": %d, "key": "user"}}]}`,
		ep.srv.URL+"/thr", limit, per.Milliseconds()))
	require.Equal(t, http.StatusOK, status, "%s", raw)
	runs := map[string]bool{}
	send := func(p *proc, from, to int) {
		events := make([]string, 0, to-from)
		for i := from; i < to; i++ {
			events = append(events, fmt.Sprintf(`{"name": "thr", "data": {"user": "t", "n": %d}}`, i))
		}
		for _, ev := range sendNative(t, client, p, "["+strings.Join(events, ",")+"]") {
			require.Len(t, ev.Runs, 1, "%+v", ev)
			require.NotEmpty(t, ev.Runs[0].RunID, "a throttled run is created at once: %+v", ev)
			runs[ev.Runs[0].RunID] = true
		}
	}
	// 3 runs before the crash: the burst starts, the third waits in the engine's due index.
	send(p1, 0, limit+1)
	before := ep.waitRuns(t, "thr", limit, 10*time.Second)
	p1.Kill()
	killAt := time.Now()
	p2 := startDuratonAddr(t, dataDir, addr)
	restartAt := time.Now()
	// 2 more right after the restart: booked after the third (the key's throttle state
	// survived), not started at once as a fresh key would be.
	send(p2, limit+1, total)
	require.Len(t, runs, total)
	all := ep.waitRuns(t, "thr", total, 20*time.Second)

	t0 := all[0].at
	var timeline strings.Builder
	for _, d := range all {
		fmt.Fprintf(&timeline, "  +%dms %s n=%v\n", d.at.Sub(t0).Milliseconds(), d.runID, d.payload.Data["n"])
	}
	t.Logf("killed at +%dms after %d starts, restarted at +%dms; starts:\n%s",
		killAt.Sub(t0).Milliseconds(), len(before), restartAt.Sub(t0).Milliseconds(), timeline.String())
	if nextDue := before[0].at.Add(interval); !restartAt.Before(nextDue) {
		t.Logf("the restart took longer than the throttle's interval: this run cannot tell a kept schedule from a lost one")
	}
	for _, d := range all {
		require.True(t, runs[d.runID], "a run nobody created: %s", d.runID)
	}
	status, raw = nativeCall(t, client, p2, http.MethodGet, "/runs?workflow=thr", "")
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var list struct{ Runs []struct{ RunID string } }
	require.NoError(t, json.Unmarshal(raw, &list), "%s", raw)
	require.Len(t, list.Runs, total, "no run added or lost across the restart: %s", raw)
	ats := make([]time.Time, len(all))
	for i, d := range all {
		ats[i] = d.at
	}
	sort.Slice(ats, func(i, j int) bool { return ats[i].Before(ats[j]) })
	for i := range ats {
		for j := i + 1; j < len(ats); j++ {
			minGap := time.Duration(j-i-(limit-1))*interval - tolerance
			require.GreaterOrEqual(t, ats[j].Sub(ats[i]), minGap,
				"starts %d and %d are %dms apart, the throttle (%d per %s) allows no less than %dms\n%s",
				i, j, ats[j].Sub(ats[i]).Milliseconds(), limit, per, minGap.Milliseconds(), timeline.String())
		}
	}
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// Flow control across a crash (docs/guarantees.md, "Delivery semantics"): rate starts are
// made durable before the request leaves, so a SIGKILL + restart cannot turn a rate-limited
// key into a burst; in-flight deliveries go back to their waitlist and are sent again.

// flowStart is one request an endpoint received.
type flowStart struct {
	at, end time.Time // request arrived / answer written (zero while open)
	msgID   string
	retried string
	body    string
}

// flowEndpoint is a loopback endpoint that records every request. hold, when set, decides
// per request whether to keep it open until release is closed or the caller goes away.
type flowEndpoint struct {
	srv     *httptest.Server
	mu      sync.Mutex
	starts  []*flowStart
	hold    func(s *flowStart, nth int) bool // nth: deliveries of this message so far, this one included
	release chan struct{}
}

func newFlowEndpoint(t *testing.T, hold func(s *flowStart, nth int) bool) *flowEndpoint {
	t.Helper()
	ep := &flowEndpoint{hold: hold, release: make(chan struct{})}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := &flowStart{at: time.Now(), msgID: r.Header.Get("Upstash-Message-Id"), retried: r.Header.Get("Upstash-Retried")}
		b, _ := io.ReadAll(r.Body)
		s.body = string(b)
		ep.mu.Lock()
		ep.starts = append(ep.starts, s)
		nth := 0
		for _, x := range ep.starts {
			if x.msgID == s.msgID {
				nth++
			}
		}
		ep.mu.Unlock()
		if ep.hold != nil && ep.hold(s, nth) {
			select {
			case <-ep.release:
			case <-r.Context().Done(): // duraton died: the connection is gone
				ep.mu.Lock()
				s.end = time.Now()
				ep.mu.Unlock()
				return
			}
		}
		w.WriteHeader(http.StatusOK)
		ep.mu.Lock()
		s.end = time.Now()
		ep.mu.Unlock()
	}))
	// Registered before duraton starts, so these run after it stopped: release any held
	// request first, then close the server (Close waits for the handlers).
	t.Cleanup(ep.srv.Close)
	t.Cleanup(func() {
		select {
		case <-ep.release:
		default:
			close(ep.release)
		}
	})
	return ep
}

// snapshot copies the recorded requests, in arrival order.
func (ep *flowEndpoint) snapshot() []flowStart {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	out := make([]flowStart, len(ep.starts))
	for i, s := range ep.starts {
		out[i] = *s
	}
	return out
}

// waitStarts polls until cond holds for the recorded requests, or fails after timeout.
func (ep *flowEndpoint) waitStarts(t *testing.T, what string, timeout time.Duration, cond func([]flowStart) bool) []flowStart {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := ep.snapshot()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; requests so far:\n%s", timeout, what, flowTimeline(s, time.Time{}))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// flowTimeline renders requests relative to the first one (and marks the crash).
func flowTimeline(starts []flowStart, killAt time.Time) string {
	if len(starts) == 0 {
		return "  (none)"
	}
	t0 := starts[0].at
	var b strings.Builder
	marked := killAt.IsZero()
	for _, s := range starts {
		if !marked && s.at.After(killAt) {
			fmt.Fprintf(&b, "  --- SIGKILL at +%dms\n", killAt.Sub(t0).Milliseconds())
			marked = true
		}
		end := "open"
		if !s.end.IsZero() {
			end = fmt.Sprintf("+%dms", s.end.Sub(t0).Milliseconds())
		}
		fmt.Fprintf(&b, "  +%dms..%s %s body=%q retried=%s\n", s.at.Sub(t0).Milliseconds(), end, s.msgID, s.body, s.retried)
	}
	return b.String()
}

// distinctBodies counts the different bodies received.
func distinctBodies(starts []flowStart) int {
	seen := map[string]bool{}
	for _, s := range starts {
		seen[s.body] = true
	}
	return len(seen)
}

// publishFlow publishes body to dest under a flow-control key and returns the message id.
func publishFlow(t *testing.T, client *http.Client, p *proc, dest, body, key, value string) string {
	t.Helper()
	req, err := p.apiRequest(context.Background(), http.MethodPost, "/v2/publish/"+dest, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Upstash-Flow-Control-Key", key)
	req.Header.Set("Upstash-Flow-Control-Value", value)
	res, err := client.Do(req)
	require.NoError(t, err, "publish %q", body)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, res.StatusCode, "publish %q: %s", body, raw)
	var answer struct {
		MessageID string `json:"messageId"`
	}
	require.NoError(t, json.Unmarshal(raw, &answer), "publish answer %s", raw)
	require.NotEmpty(t, answer.MessageID, "publish answer %s", raw)
	return answer.MessageID
}

func randomTag(t *testing.T) string {
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// TestFlowControlSurvivesSIGKILL: 12 messages under rate=3 per 4 s. The first 3 start at
// once; duraton is SIGKILLed right after and restarted on the same data directory and port.
// The restarted process must remember those 3 starts: nothing starts before first+4 s, no
// 4 s window ever holds more than 3 starts (re-sent duplicates count), and all 12 arrive.
func TestFlowControlSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	const (
		total  = 12
		rate   = 3
		period = 4 * time.Second
		// The endpoint sees a start a little after duraton makes it: on a loaded 2-core CI
		// machine (the race detector, other test processes) a request has been seen to
		// arrive 111 ms late. A forgotten window would show a start within ~1 s of the
		// restart and a 4th start inside 3.5 s, far beyond this.
		tolerance = 500 * time.Millisecond
	)
	ep := newFlowEndpoint(t, nil)
	dest := ep.srv.URL + "/rate"

	addr := freeLoopbackAddr(t)
	dataDir := t.TempDir()
	p1 := startDuratonAddr(t, dataDir, addr)
	client := newAPIClient(t, 10*time.Second)

	for i := range total {
		publishFlow(t, client, p1, dest, fmt.Sprintf("m%02d", i), "r", fmt.Sprintf("rate=%d,period=%s", rate, "4s"))
	}
	first := ep.waitStarts(t, "the first 3 starts", 10*time.Second, func(s []flowStart) bool { return len(s) >= rate })
	p1.Kill()
	killAt := time.Now()
	t.Logf("SIGKILLed duraton %dms after the first start, with %d starts seen", killAt.Sub(first[0].at).Milliseconds(), len(ep.snapshot()))

	p2 := startDuratonAddr(t, dataDir, addr)
	require.Equal(t, p1.URL, p2.URL, "QSTASH_URL after the restart")
	t.Logf("restarted duraton %dms after the kill", time.Since(killAt).Milliseconds())

	// The waitlist is blocked only by the restored rate window: the next message must start
	// soon after the first start's period ends, not when something else wakes the dispatcher.
	ep.waitStarts(t, "a 4th message to start once the first start's period ended (at +4s)", time.Until(first[0].at.Add(period+3*time.Second)),
		func(s []flowStart) bool { return distinctBodies(s) > rate })
	ep.waitStarts(t, fmt.Sprintf("all %d messages delivered", total), 40*time.Second, func(s []flowStart) bool { return distinctBodies(s) == total })
	time.Sleep(300 * time.Millisecond) // a duplicate sent right after the last new one still counts
	all := ep.snapshot()
	timeline := flowTimeline(all, killAt)
	t.Logf("requests:\n%s", timeline)

	t0 := all[0].at
	// The first start after the crash waits for the first start's period to end.
	for _, s := range all {
		if s.at.After(killAt) {
			require.False(t, s.at.Before(t0.Add(period-tolerance)),
				"first start after the restart at +%dms: the rate window (3 per 4s) was forgotten across the crash, want >= +%dms\n%s",
				s.at.Sub(t0).Milliseconds(), (period - tolerance).Milliseconds(), timeline)
			break
		}
	}
	// No window of length period holds more than rate starts (every window anchored at a start).
	ats := make([]time.Time, len(all))
	for i, s := range all {
		ats[i] = s.at
	}
	sort.Slice(ats, func(i, j int) bool { return ats[i].Before(ats[j]) })
	for i := range ats {
		n := 0
		for j := i; j < len(ats) && ats[j].Before(ats[i].Add(period-tolerance)); j++ {
			n++
		}
		require.LessOrEqual(t, n, rate, "%d starts within %s of the start at +%dms (rate=3, period=4s)\n%s",
			n, period, ats[i].Sub(t0).Milliseconds(), timeline)
	}
	require.Equal(t, total, distinctBodies(all), "every message delivered")
	if dups := len(all) - total; dups > 0 {
		t.Logf("%d duplicate deliveries (re-sent after the crash; allowed, counted as starts above)", dups)
	}
}

// TestFlowControlInFlightRedeliveredOnce: under parallelism=1 the endpoint keeps the first
// delivery open; duraton is SIGKILLed while it is open and restarted. The open delivery goes
// back to the waitlist: it is sent exactly once more, without spending a retry
// (Upstash-Retried: 0), and the other messages follow one at a time, each exactly once.
func TestFlowControlInFlightRedeliveredOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts, kills and restarts the duraton binary")
	}
	const total = 4
	// Hold the first delivery of the first message to arrive; answer every other request
	// after a short while, so an overlap would be visible.
	var heldOnce sync.Once
	ep := newFlowEndpoint(t, func(s *flowStart, nth int) bool {
		held := false
		heldOnce.Do(func() { held = true })
		if !held {
			time.Sleep(50 * time.Millisecond)
		}
		return held
	})
	dest := ep.srv.URL + "/par"
	key := "p-" + randomTag(t)

	addr := freeLoopbackAddr(t)
	dataDir := t.TempDir()
	p1 := startDuratonAddr(t, dataDir, addr)
	client := newAPIClient(t, 10*time.Second)
	ids := map[string]string{} // message id → body
	for i := range total {
		body := fmt.Sprintf("h%02d", i)
		ids[publishFlow(t, client, p1, dest, body, key, "parallelism=1")] = body
	}
	first := ep.waitStarts(t, "the first delivery", 10*time.Second, func(s []flowStart) bool { return len(s) >= 1 })
	heldID := first[0].msgID
	require.Contains(t, ids, heldID, "the held request carries the Upstash-Message-Id of a published message")
	time.Sleep(500 * time.Millisecond)
	require.Len(t, ep.snapshot(), 1, "parallelism=1: nothing else starts while the first delivery is open\n%s", flowTimeline(ep.snapshot(), time.Time{}))

	p1.Kill()
	killAt := time.Now()
	p2 := startDuratonAddr(t, dataDir, addr)
	require.Equal(t, p1.URL, p2.URL, "QSTASH_URL after the restart")

	ep.waitStarts(t, "every message delivered and the held one sent again", 30*time.Second, func(s []flowStart) bool {
		again := 0
		for _, x := range s {
			if x.msgID == heldID {
				again++
			}
		}
		return distinctBodies(s) == total && again >= 2
	})
	time.Sleep(time.Second) // a further (wrong) redelivery would show up here
	all := ep.snapshot()
	timeline := flowTimeline(all, killAt)
	t.Logf("requests:\n%s", timeline)

	per := map[string][]flowStart{}
	for _, s := range all {
		per[s.msgID] = append(per[s.msgID], s)
	}
	require.Len(t, per, total, "requests for exactly the %d published messages\n%s", total, timeline)
	for id, body := range ids {
		got := per[id]
		if id == heldID {
			require.Len(t, got, 2, "the delivery open at the crash (%s, %s) is sent exactly once more\n%s", id, body, timeline)
			require.True(t, got[1].at.After(killAt), "its second delivery comes after the restart\n%s", timeline)
			for _, s := range got {
				require.Equal(t, "0", s.retried, "Upstash-Retried of %s: a crash does not spend a retry\n%s", id, timeline)
			}
			continue
		}
		require.Len(t, got, 1, "message %s (%s) was never sent before the crash: exactly one delivery\n%s", id, body, timeline)
		require.Equal(t, "0", got[0].retried, "Upstash-Retried of %s\n%s", id, timeline)
		require.True(t, got[0].at.After(killAt), "message %s starts only after the restart\n%s", id, timeline)
	}
	// After the restart: one at a time (intervals [arrived, answered) never overlap).
	var after []flowStart
	for _, s := range all {
		if s.at.After(killAt) {
			after = append(after, s)
		}
	}
	for i, s := range after {
		require.False(t, s.end.IsZero(), "request %s still open\n%s", s.msgID, timeline)
		for _, o := range after[i+1:] {
			require.False(t, o.at.Before(s.end), "parallelism=1: %s started at +%dms while %s was open until +%dms\n%s",
				o.msgID, o.at.Sub(all[0].at).Milliseconds(), s.msgID, s.end.Sub(all[0].at).Milliseconds(), timeline)
		}
	}
}

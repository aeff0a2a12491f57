package native

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
)

// heldEndpoint answers each run's first delivery after hold(its event data) of bubble
// time, as an SDK does without finishing the run, and records when each arrived, which
// workflow and which event's data it carried, and the most deliveries in flight at once
// per label (see inFlightBy).
type heldEndpoint struct {
	hold  func(workflow string, data map[string]any) time.Duration
	label func(workflow string, data map[string]any) []string

	mu     sync.Mutex
	starts []heldStart
	open   map[string]int
	most   map[string]int
}

type heldStart struct {
	at       time.Time
	workflow string
	name     string // the event data's "n"
}

func (e *heldEndpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	var hist []struct{ Body string }
	_ = json.Unmarshal(body, &hist)
	var p struct {
		Data map[string]any `json:"data"`
	}
	if len(hist) > 0 {
		raw, _ := base64.StdEncoding.DecodeString(hist[0].Body)
		_ = json.Unmarshal(raw, &p)
	}
	wf := r.Header.Get("Duraton-Workflow")
	name, _ := p.Data["n"].(string)
	var labels []string
	if e.label != nil {
		labels = e.label(wf, p.Data)
	}
	e.mu.Lock()
	if e.open == nil {
		e.open, e.most = map[string]int{}, map[string]int{}
	}
	e.starts = append(e.starts, heldStart{at: time.Now(), workflow: wf, name: name})
	for _, l := range labels {
		e.open[l]++
		e.most[l] = max(e.most[l], e.open[l])
	}
	e.mu.Unlock()
	if e.hold != nil {
		time.Sleep(e.hold(wf, p.Data))
	}
	e.mu.Lock()
	for _, l := range labels {
		e.open[l]--
	}
	e.mu.Unlock()
	h := http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Header: h, Request: r}, nil
}

// startsSince lists "name@offset" of every start, in arrival order.
func (e *heldEndpoint) startsSince(t0 time.Time) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, s := range e.starts {
		out = append(out, s.name+"@"+s.at.Sub(t0).String())
	}
	return out
}

func (e *heldEndpoint) mostInFlight() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for k, v := range e.most {
		out[k] = v
	}
	return out
}

func tenSeconds(string, map[string]any) time.Duration { return 10 * time.Second }

// Throttle with concurrency: the throttle books a run's start when the run's first
// delivery is admitted, together with its concurrency slot. Runs held back by concurrency
// spend none of the throttle's burst, so when the blocker ends the next starts keep the
// throttle's pace: two at once (the burst), then one every perMs/limit — not all at once.
func TestThrottleWithConcurrencySpendsNothingWhileBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &heldEndpoint{hold: func(_ string, d map[string]any) time.Duration {
			if d["n"] == "a" {
				return 10 * time.Second
			}
			return 0
		}}
		n, stop := bubbleNodeWith(t, t.TempDir(), ep)
		defer stop()
		n.register(t, "app", `{"workflows": [{"name": "thr", "url": "http://x.test/thr", "triggers": [{"event": "e"}],
			"concurrency": {"limit": 1}, "throttle": {"limit": 2, "perMs": 2000}}]}`)
		t0 := time.Now()
		for _, name := range []string{"a", "b", "c", "d"} {
			n.send(t, ev("e", `{"n": "`+name+`"}`, ""))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		// a at 0; b, c, d wait for a's slot (10 s) without booking; then b and c are
		// the burst and d follows one interval (1 s) later.
		require.Equal(t, []string{"a@0s", "b@10s", "c@10s", "d@11s"}, ep.startsSince(t0))
	})
}

// Two concurrency constraints at once: at most one delivery per account and two for the
// whole workflow. A delivery waits for both; one blocked by either spends the other's
// slot on nothing, and keys waiting for the workflow's slot take turns in the order they
// started waiting for it.
func TestConcurrencyTwoScopes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &heldEndpoint{
			hold: func(_ string, d map[string]any) time.Duration {
				if d["n"] == "b1" {
					return 12 * time.Second // so releases at 10 s and 12 s have an order
				}
				return 10 * time.Second
			},
			label: func(_ string, d map[string]any) []string {
				acct, _ := d["account"].(string)
				return []string{"account:" + acct, "all"}
			},
		}
		n, stop := bubbleNodeWith(t, t.TempDir(), ep)
		defer stop()
		n.register(t, "app", `{"workflows": [{"name": "sync", "url": "http://x.test/sync", "triggers": [{"event": "e"}],
			"concurrency": [{"limit": 1, "key": "account"}, {"limit": 2}]}]}`)
		t0 := time.Now()
		for _, e := range [][2]string{{"a1", "a"}, {"a2", "a"}, {"b1", "b"}, {"c1", "c"}, {"b2", "b"}} {
			n.send(t, ev("e", `{"n": "`+e[0]+`", "account": "`+e[1]+`"}`, ""))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		// 0 s: a1 and b1 take the workflow's two slots; a2 waits for account a, c1 for
		// the workflow (from 0 s), b2 for account b. 10 s: a1 ends; c1 has waited longest
		// for the workflow's slot. 12 s: b1 ends; a2 (account a free since 10 s). 20 s:
		// c1 ends; b2.
		starts := ep.startsSince(t0)
		require.Len(t, starts, 5)
		require.ElementsMatch(t, []string{"a1@0s", "b1@0s"}, starts[:2])
		require.Equal(t, []string{"c1@10s", "a2@12s", "b2@20s"}, starts[2:])
		most := ep.mostInFlight()
		require.Equal(t, 2, most["all"], "the workflow scope")
		for _, acct := range []string{"a", "b", "c"} {
			require.Equal(t, 1, most["account:"+acct], "account %s", acct)
		}
	})
}

// The project ceiling is shared by every workflow of the project, and the keys waiting
// for it take turns: a flooded key does not starve another workflow's key.
func TestCeilingSharedAcrossWorkflowsKeysTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &heldEndpoint{hold: tenSeconds, label: func(string, map[string]any) []string { return []string{"all"} }}
		n, stop := bubbleNodeConfig(t, t.TempDir(), ep, func(c *delivery.Config) { c.ProjectCeiling = 2 })
		defer stop()
		n.register(t, "app", `{"workflows": [
			{"name": "x", "url": "http://x.test/x", "triggers": [{"event": "x"}], "concurrency": {"limit": 10, "key": "k"}},
			{"name": "y", "url": "http://x.test/y", "triggers": [{"event": "y"}], "concurrency": {"limit": 10, "key": "k"}}]}`)
		t0 := time.Now()
		for _, name := range []string{"x1", "x2", "x3", "x4", "x5", "x6"} {
			n.send(t, ev("x", `{"n": "`+name+`", "k": "flood"}`, ""))
		}
		n.send(t, ev("y", `{"n": "y1", "k": "calm"}`, ""), ev("y", `{"n": "y2", "k": "calm"}`, ""))
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		starts := ep.startsSince(t0)
		require.Len(t, starts, 8)
		require.Equal(t, 2, ep.mostInFlight()["all"], "never more than the ceiling")
		require.ElementsMatch(t, []string{"x1@0s", "x2@0s"}, starts[:2])
		require.ElementsMatch(t, []string{"x3@10s", "y1@10s"}, starts[2:4], "y takes its turn at the first release")
		require.ElementsMatch(t, []string{"x4@20s", "y2@20s"}, starts[4:6])
		require.ElementsMatch(t, []string{"x5@30s", "x6@30s"}, starts[6:8])
	})
}

// Priority across waitlists: keys waiting for the project ceiling are served in the
// order (joined − head's shift). A shifted workflow's key goes ahead of an unshifted key
// that joined within the last shiftMs; a negative shift runs no earlier than shiftMs
// after its event, behind everything that came before then.
func TestPriorityAcrossWaitlists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &heldEndpoint{hold: tenSeconds}
		n, stop := bubbleNodeConfig(t, t.TempDir(), ep, func(c *delivery.Config) { c.ProjectCeiling = 1 })
		defer stop()
		n.register(t, "app", `{"workflows": [
			{"name": "plain", "url": "http://x.test/p", "triggers": [{"event": "plain"}], "concurrency": {"limit": 5, "key": "k"}},
			{"name": "high", "url": "http://x.test/h", "triggers": [{"event": "high"}], "concurrency": {"limit": 5, "key": "k"}, "priority": {"shiftMs": 60000}},
			{"name": "low", "url": "http://x.test/l", "triggers": [{"event": "low"}], "concurrency": {"limit": 5, "key": "k"}, "priority": {"shiftMs": -60000}}]}`)
		t0 := time.Now()
		n.send(t, ev("plain", `{"n": "p1", "k": "a"}`, "")) // holds the only slot for 10 s
		time.Sleep(time.Second)
		n.send(t, ev("low", `{"n": "l1", "k": "a"}`, "")) // sent first, but shifted back by a minute
		time.Sleep(time.Second)
		n.send(t, ev("plain", `{"n": "p2", "k": "a"}`, ""))
		time.Sleep(time.Second)
		n.send(t, ev("high", `{"n": "h1", "k": "a"}`, "")) // waits last, shifted ahead by a minute
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		require.Equal(t, []string{"p1@0s", "h1@10s", "p2@20s", "l1@1m1s"}, ep.startsSince(t0))
	})
}

// A negative priority delays on an idle server too: shiftMs -2000 starts the run 2 s
// after its event, a positive shift at once.
func TestNegativePriorityDelaysOnAnIdleServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &heldEndpoint{hold: func(string, map[string]any) time.Duration { return time.Millisecond }}
		n, stop := bubbleNodeConfig(t, t.TempDir(), ep, func(*delivery.Config) {})
		defer stop()
		n.register(t, "app", `{"workflows": [
			{"name": "low", "url": "http://x.test/l", "triggers": [{"event": "low"}], "priority": {"shiftMs": -2000}},
			{"name": "high", "url": "http://x.test/h", "triggers": [{"event": "high"}], "priority": {"shiftMs": 2000}}]}`)
		t0 := time.Now()
		n.send(t, ev("low", `{"n": "l1"}`, ""))
		n.send(t, ev("high", `{"n": "h1"}`, ""))
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, []string{"h1@0s", "l1@2s"}, ep.startsSince(t0))
	})
}

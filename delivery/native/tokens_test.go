package native

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/storage"
)

// aiEndpoint is a workflow endpoint and an LLM in one transport: a run's first delivery
// publishes one AI call (as a workflow SDK does for context.call) and records its start;
// the call's answer reports usage; the callback completes the run.
type aiEndpoint struct {
	engine *delivery.Engine
	input  int64 // the LLM's usage per call: input tokens, output tokens
	output int64
	// inputOf, when set, gives the input tokens of the call of the run named n.
	inputOf func(n string) int64

	mu     sync.Mutex
	starts []heldStart
	calls  int
}

func (e *aiEndpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	answer := func(body string) (*http.Response, error) {
		h := http.Header{"Upstash-Workflow-Sdk-Version": {"1"}, "Content-Type": {"application/json"}}
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body)), Header: h, Request: r}, nil
	}
	runID := r.Header.Get("Upstash-Workflow-Runid")
	switch {
	case r.URL.Host == "llm.test":
		e.mu.Lock()
		e.calls++
		e.mu.Unlock()
		in := e.input
		if e.inputOf != nil {
			var req struct{ Messages []struct{ Content string } }
			_ = json.Unmarshal(body, &req)
			in = e.inputOf(req.Messages[0].Content)
		}
		return answer(`{"model": "m", "choices": [], "usage": {"prompt_tokens": ` + itoa(in) + `, "completion_tokens": ` + itoa(e.output) + `}}`)
	case r.Header.Get("Upstash-Workflow-Callback") == "true":
		if err := e.engine.CompleteRun(context.Background(), project, runID, nil, false); err != nil {
			return nil, err
		}
		return answer("{}")
	}
	var hist []struct{ Body string }
	_ = json.Unmarshal(body, &hist)
	var p struct {
		Data map[string]any `json:"data"`
	}
	if len(hist) > 0 {
		raw, _ := base64.StdEncoding.DecodeString(hist[0].Body)
		_ = json.Unmarshal(raw, &p)
	}
	name, _ := p.Data["n"].(string)
	e.mu.Lock()
	e.starts = append(e.starts, heldStart{at: time.Now(), workflow: r.Header.Get("Duraton-Workflow"), name: name})
	e.mu.Unlock()
	wfURL := "http://" + r.URL.Host + r.URL.Path
	_, err := e.engine.Publish(context.Background(), []*delivery.Message{{
		Project: project, URL: "http://llm.test/v1/chat/completions", Method: http.MethodPost,
		Header: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer k"}},
		Body:   []byte(`{"model": "m", "messages": [{"role": "user", "content": "` + name + `"}]}`),
		RunID:  runID, CallType: delivery.CallToCallback,
		Callback: &storage.CallbackSpec{URL: wfURL, Method: http.MethodPost, RunID: runID, CallType: delivery.CallFromCallback,
			Header: map[string][]string{"Upstash-Workflow-Callback": {"true"}}},
	}})
	if err != nil {
		return nil, err
	}
	return answer("{}")
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func (e *aiEndpoint) startsSince(t0 time.Time) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	starts := slices.Clone(e.starts)
	// Runs that start at the same instant (another key's, say) may reach the endpoint in
	// either order: by time, then by name.
	slices.SortStableFunc(starts, func(a, b heldStart) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for _, s := range starts {
		out = append(out, s.name+"@"+s.at.Sub(t0).String())
	}
	return out
}

// TestTokenThrottleStartTimes: tokenThrottle {tokens: 1000, perMs: 10000} (100 tokens/s),
// each run one AI step of 600 tokens. a starts at once and leaves 400; b starts at once
// too (the bucket is above zero) and reserves the scope's average, 600 (to -200); c waits
// until the bucket is above zero again, 2 s later, and reserves 600 (to -600); d waits
// 6 s more. The actual usage replaces each reservation when the run ends, so the
// schedule follows the bucket exactly; the flow state shows the bucket.
func TestTokenThrottleStartTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &aiEndpoint{input: 500, output: 100}
		n, stop := bubbleNodeWith(t, t.TempDir(), ep)
		defer stop()
		ep.engine = n.engine
		n.register(t, "app", `{"workflows": [{"name": "ask", "url": "http://wf.test/ask", "triggers": [{"event": "e"}],
			"tokenThrottle": {"tokens": 1000, "perMs": 10000, "key": "team"}}]}`)
		t0 := time.Now()
		n.send(t, ev("e", `{"n": "a", "team": "t1"}`, ""))
		synctest.Wait()
		st, err := n.svc.FlowState(context.Background(), project, "", "")
		require.NoError(t, err)
		require.Len(t, st.TokenThrottle, 1)
		tt := st.TokenThrottle[0]
		require.Equal(t, TokenThrottleState{App: "app", Workflow: "ask", Key: "t1", Tokens: 1000, Level: 400,
			NextStartAt: rfc3339(t0), AvgRunTokens: 600}, tt, "a spent 600 of 1000")

		for _, name := range []string{"b", "c", "d"} {
			n.send(t, ev("e", `{"n": "`+name+`", "team": "t1"}`, ""))
		}
		// Another key value has its own bucket: it starts at once.
		n.send(t, ev("e", `{"n": "x", "team": "t2"}`, ""))
		synctest.Wait()
		runs, _, err := n.svc.Runs(context.Background(), project, RunFilter{Status: StatusQueued}, nil, 10)
		require.NoError(t, err)
		require.Len(t, runs, 2, "c and d are queued")
		for _, r := range runs {
			require.NotNil(t, r.Waiting)
			require.Contains(t, r.Waiting.Reason, "waiting for AI tokens")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, []string{"a@0s", "b@0s", "x@0s", "c@2.000000001s", "d@8.000000001s"}, ep.startsSince(t0))
		require.Equal(t, 5, ep.calls)

		st, err = n.svc.FlowState(context.Background(), project, "", "")
		require.NoError(t, err)
		require.Len(t, st.TokenThrottle, 2)
		require.Equal(t, int64(1000), st.TokenThrottle[0].Tokens)
		require.InDelta(t, 1000, st.TokenThrottle[0].Level, 1e-6, "a minute later the bucket is full again")
	})
}

// TestTokenThrottleSurvivesRestart: the bucket (its debt) and the scope's average per run
// are in the data file: after a restart, the next starts keep the bucket's schedule.
func TestTokenThrottleSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		ep := &aiEndpoint{input: 500, output: 100}
		n, stop := bubbleNodeWith(t, dir, ep)
		ep.engine = n.engine
		n.register(t, "app", `{"workflows": [{"name": "ask", "url": "http://wf.test/ask", "triggers": [{"event": "e"}],
			"tokenThrottle": {"tokens": 1000, "perMs": 10000}}]}`)
		t0 := time.Now()
		n.send(t, ev("e", `{"n": "a"}`, ""))
		synctest.Wait()
		n.send(t, ev("e", `{"n": "b"}`, ""))
		synctest.Wait()
		stop() // the bucket is at -200 (a and b spent 600 each), the average is 600

		n, stop = bubbleNodeWith(t, dir, ep)
		defer stop()
		ep.engine = n.engine
		st, err := n.svc.FlowState(context.Background(), project, "", "")
		require.NoError(t, err)
		require.Len(t, st.TokenThrottle, 1)
		require.Equal(t, float64(-200), st.TokenThrottle[0].Level)
		require.Equal(t, int64(600), st.TokenThrottle[0].AvgRunTokens)
		require.Equal(t, rfc3339(t0.Add(2*time.Second+1)), st.TokenThrottle[0].NextStartAt)
		n.send(t, ev("e", `{"n": "c"}`, ""))
		n.send(t, ev("e", `{"n": "d"}`, ""))
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, []string{"a@0s", "b@0s", "c@2.000000001s", "d@8.000000001s"}, ep.startsSince(t0))
	})
}

// TestTokenThrottleCreditWakesWaitingStart: a reservation larger than what the run then
// spends is given back at the run's end, and a start waiting for the bucket is checked
// again at once. tokenThrottle 1000 per 10 s; a spends 600 (average 600); b starts
// (level 400) and reserves 600 (-200), so c waits (until 2 s); b spends only 300 and ends:
// its 600 come back (+100), c starts at once and reserves the new average 450 (-350);
// c spends 300 and ends (-200), so d starts at 2 s.
func TestTokenThrottleCreditWakesWaitingStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &aiEndpoint{output: 0, inputOf: func(n string) int64 {
			if n == "a" {
				return 600
			}
			return 300
		}}
		n, stop := bubbleNodeWith(t, t.TempDir(), ep)
		defer stop()
		ep.engine = n.engine
		n.register(t, "app", `{"workflows": [{"name": "ask", "url": "http://wf.test/ask", "triggers": [{"event": "e"}],
			"tokenThrottle": {"tokens": 1000, "perMs": 10000}}]}`)
		t0 := time.Now()
		n.send(t, ev("e", `{"n": "a"}`, ""))
		synctest.Wait()
		for _, name := range []string{"b", "c", "d"} {
			n.send(t, ev("e", `{"n": "`+name+`"}`, ""))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, []string{"a@0s", "b@0s", "c@0s", "d@2.000000001s"}, ep.startsSince(t0))
	})
}

// TestTokenThrottleFreshKeyProbes: a fresh key knows no average tokens per run, so it
// starts one run and waits for it to end before starting another (a crowd of starts
// against an unknown bucket would overdraw it); then the average paces the rest. With a
// declared estimate the key reserves it per start instead, without waiting.
func TestTokenThrottleFreshKeyProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := &aiEndpoint{input: 500, output: 100}
		n, stop := bubbleNodeWith(t, t.TempDir(), ep)
		defer stop()
		ep.engine = n.engine
		n.register(t, "app", `{"workflows": [
			{"name": "ask", "url": "http://wf.test/ask", "triggers": [{"event": "e"}], "tokenThrottle": {"tokens": 1000, "perMs": 10000}},
			{"name": "est", "url": "http://wf.test/est", "triggers": [{"event": "f"}], "tokenThrottle": {"tokens": 1000, "perMs": 10000, "estimate": 300}}]}`)
		t0 := time.Now()
		for _, name := range []string{"a", "b", "c"} {
			n.send(t, ev("e", `{"n": "`+name+`"}`, ""))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		// a alone; b once a has ended (400 left, then the average 600 reserved: -200);
		// c when the bucket is above zero again, 2 s later.
		require.Equal(t, []string{"a@0s", "b@0s", "c@2.000000001s"}, ep.startsSince(t0))

		t1 := time.Now()
		var batch []EventIn
		for _, name := range []string{"p", "q", "r", "s", "u"} {
			batch = append(batch, ev("f", `{"n": "`+name+`"}`, ""))
		}
		n.send(t, batch...) // one request: admitted before any of them ends
		time.Sleep(time.Minute)
		synctest.Wait()
		// Each start reserves 300 while no run has ended: p, q, r and s start at once
		// (1000 → -200); u waits for the bucket.
		starts := ep.startsSince(t1)[3:]
		require.Len(t, starts, 5)
		require.ElementsMatch(t, []string{"p@0s", "q@0s", "r@0s", "s@0s"}, starts[:4])
		require.True(t, strings.HasPrefix(starts[4], "u@") && starts[4] != "u@0s", "u waits: %v", starts)
	})
}

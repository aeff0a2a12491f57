package main

// Interop: the Go SDK and the official TypeScript SDKs working on the same runs through one
// real duraton process. Go code runs in the test process (sdk.Serve workflows on httptest
// servers, sdk.Client, sdk.Receiver); the official @upstash/workflow and @upstash/qstash SDKs
// run in Node processes (testdata/compat/interop/*.mjs, driven over stdin/stdout).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/sdk"
)

// interopWait bounds every wait of these tests (a run, a delivery, a Node event).
const interopWait = 30 * time.Second

// TestInteropGoWorkflowTriggeredByTS: a Go workflow (sdk.Serve, verifying every delivery with
// the process's signing keys) doing Run → Sleep(1s) → Parallel(2 branches) → Run is started
// by the official @upstash/workflow Client.trigger with a JSON body and a user header; the
// run must end RUN_SUCCESS with the route's result as workflowRunResponse.
func TestInteropGoWorkflowTriggeredByTS(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the duraton binary and Node")
	}
	dir, node := compatDir(t)
	p := startDuraton(t, t.TempDir())
	client := interopClient(t, p)
	k := randomTag(t)

	var mu sync.Mutex
	var aAt, leftAt, rightAt time.Time
	var aRuns, leftRuns, rightRuns, finalRuns int
	mark := func(at *time.Time, n *int) {
		mu.Lock()
		defer mu.Unlock()
		*at = time.Now()
		*n++
	}
	route := func(c *sdk.Context) (any, error) {
		var in struct {
			Name string `json:"name"`
			N    int    `json:"n"`
		}
		if err := c.DecodePayload(&in); err != nil {
			return nil, fmt.Errorf("payload %q: %w", c.Payload(), err)
		}
		a, err := sdk.Run(c, "go-a", func() (int, error) { mark(&aAt, &aRuns); return in.N * 2, nil })
		if err != nil {
			return nil, err
		}
		if err := c.Sleep("go-nap", time.Second); err != nil {
			return nil, err
		}
		left := sdk.Go("go-left", func() (string, error) { mark(&leftAt, &leftRuns); return fmt.Sprintf("L%d", a), nil })
		right := sdk.Go("go-right", func() (map[string]int, error) { mark(&rightAt, &rightRuns); return map[string]int{"r": a + 1}, nil })
		if err := c.Parallel(left, right); err != nil {
			return nil, err
		}
		final, err := sdk.Run(c, "go-final", func() (string, error) {
			var unused time.Time
			mark(&unused, &finalRuns)
			return fmt.Sprintf("%s/%d", left.Result(), right.Result()["r"]), nil
		})
		if err != nil {
			return nil, err
		}
		return map[string]any{"from": "go", "name": in.Name, "a": a, "left": left.Result(), "right": right.Result(),
			"final": final, "hdr": c.Headers.Get("X-Interop")}, nil
	}
	wf := startInteropGoWorkflows(t, p, map[string]sdk.RouteFunc{"/wf/go-flow": route})
	url := wf.URL + "/wf/go-flow?src=ts"

	runID := interopTriggerFromTS(t, node, dir, p, url, `{"name":"interop","n":21}`, map[string]string{"x-interop": "from-ts-" + k}, "")
	run := interopWaitRun(t, client, runID, "RUN_SUCCESS", func() string { return wf.describe("/wf/go-flow") })

	require.NotNil(t, run.Response, "workflowRunResponse: %s", interopDescribeRun(run))
	assert.JSONEq(t, fmt.Sprintf(`{"from":"go","name":"interop","a":42,"left":"L42","right":{"r":43},"final":"L42/43","hdr":"from-ts-%s"}`, k),
		*run.Response, "workflowRunResponse")
	assert.Equal(t, url, run.URL, "the run's workflow URL is the one the TS client triggered (query kept)")
	interopAssertSteps(t, run, []string{"go-a", "go-nap", "go-left", "go-right", "go-final"})
	interopAssertParallel(t, run, "go-left", "go-right")

	mu.Lock()
	assert.Equal(t, []int{1, 1, 1, 1}, []int{aRuns, leftRuns, rightRuns, finalRuns}, "each step function ran exactly once (go-a, go-left, go-right, go-final)")
	assert.GreaterOrEqual(t, leftAt.Sub(aAt), 900*time.Millisecond, "go-left ran after the 1s sleep")
	assert.GreaterOrEqual(t, rightAt.Sub(aAt), 900*time.Millisecond, "go-right ran after the 1s sleep")
	mu.Unlock()
	wf.assertAllOK(t, "/wf/go-flow", runID)
}

// TestInteropTSWorkflowFromGo: official serve() workflows (a Node process) and Go code on the
// same runs: the Go Client triggers a TS workflow; a Go workflow invokes the TS workflow and
// gets its result; a TS workflow invokes a Go workflow (through context.invoke) and gets its
// result.
func TestInteropTSWorkflowFromGo(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the duraton binary and Node")
	}
	dir, node := compatDir(t)
	p := startDuraton(t, t.TempDir())
	client := interopClient(t, p)

	var mu sync.Mutex
	var childRuns int
	goChild := func(c *sdk.Context) (any, error) {
		var in struct {
			N int `json:"n"`
		}
		if err := c.DecodePayload(&in); err != nil {
			return nil, fmt.Errorf("payload %q: %w", c.Payload(), err)
		}
		tripled, err := sdk.Run(c, "go-triple", func() (int, error) {
			mu.Lock()
			childRuns++
			mu.Unlock()
			return in.N * 3, nil
		})
		if err != nil {
			return nil, err
		}
		return map[string]any{"from": "go-child", "tripled": tripled, "hdr": c.Headers.Get("X-Interop")}, nil
	}
	// The Go parent's invoke target is set once the Node host is up (its URL is known then),
	// the child's header and run id by the subtest.
	var tsFlowURL, invokeHdr, invokeChildID string
	goParent := func(c *sdk.Context) (any, error) {
		n, err := sdk.Run(c, "go-prep", func() (int, error) { return 5, nil })
		if err != nil {
			return nil, err
		}
		body, _ := json.Marshal(map[string]any{"n": n, "name": "invoked-by-go"})
		mu.Lock()
		req := sdk.InvokeRequest{URL: tsFlowURL, Body: body, Header: http.Header{"X-Interop": {invokeHdr}}, RunID: invokeChildID}
		mu.Unlock()
		res, err := c.Invoke("go-invoke-ts", req)
		if err != nil {
			return nil, err
		}
		return map[string]any{"child": string(res.Body), "isFailed": res.IsFailed, "isCanceled": res.IsCanceled}, nil
	}
	// A three-step Go route for runs triggered over REST.
	goThree := func(c *sdk.Context) (any, error) {
		var in struct {
			N int `json:"n"`
		}
		if err := c.DecodePayload(&in); err != nil {
			return nil, fmt.Errorf("payload %q: %w", c.Payload(), err)
		}
		a, err := sdk.Run(c, "go-1", func() (int, error) { return in.N + 1, nil })
		if err != nil {
			return nil, err
		}
		b, err := sdk.Run(c, "go-2", func() (int, error) { return a * 10, nil })
		if err != nil {
			return nil, err
		}
		return sdk.Run(c, "go-3", func() (map[string]any, error) {
			return map[string]any{"from": "go-three", "a": a, "b": b, "hdr": c.Headers.Get("X-Interop")}, nil
		})
	}
	wf := startInteropGoWorkflows(t, p, map[string]sdk.RouteFunc{"/wf/go-child": goChild, "/wf/go-parent": goParent, "/wf/go-three": goThree})
	host := startInteropHost(t, node, dir, p, "GO_CHILD_URL="+wf.URL+"/wf/go-child")
	mu.Lock()
	tsFlowURL = host.Base + "/wf/interop/ts-flow"
	mu.Unlock()

	t.Run("GoClientTriggersTSWorkflow", func(t *testing.T) {
		k := randomTag(t)
		res, err := client.Trigger(context.Background(), sdk.TriggerRequest{URL: tsFlowURL,
			BodyJSON: map[string]any{"n": 21, "name": "go"}, Headers: http.Header{"X-Interop": {"from-go-" + k}}})
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(res.RunID, "wfr_"), res.RunID)
		run := interopWaitRun(t, client, res.RunID, "RUN_SUCCESS", func() string { return host.describe(t, "/wf/interop/ts-flow") })
		require.NotNil(t, run.Response, interopDescribeRun(run))
		assert.JSONEq(t, fmt.Sprintf(`{"from":"ts","doubled":42,"left":"L42","right":{"r":43},"hdr":"from-go-%s","name":"go"}`, k),
			*run.Response, "workflowRunResponse")
		interopAssertSteps(t, run, []string{"ts-double", "ts-nap", "ts-left", "ts-right", "ts-final"})
		interopAssertParallel(t, run, "ts-left", "ts-right")
		host.assertAllOK(t, "/wf/interop/ts-flow", res.RunID)
	})

	// POST /v2/trigger/{url} as any language does it over REST, without an SDK: the route's
	// SDK gets Upstash-Workflow-Unknown-Sdk, re-publishes the init, and the run goes on.
	t.Run("RESTTriggerRunsTSWorkflow", func(t *testing.T) {
		k := randomTag(t)
		runID := "wfr_rest-" + k
		url := host.Base + "/wf/interop/ts-three"
		got := restTrigger(t, p, url, runID, `{"n":4}`, "Upstash-Forward-X-Interop", "rest-"+k)
		run := interopWaitRun(t, client, runID, "RUN_SUCCESS", func() string { return host.describe(t, "/wf/interop/ts-three") })
		require.NotNil(t, run.Response, interopDescribeRun(run))
		assert.JSONEq(t, fmt.Sprintf(`{"from":"ts-three","a":5,"b":50,"hdr":"rest-%s"}`, k), *run.Response)
		interopAssertSteps(t, run, []string{"three-1", "three-2", "three-3"})
		assert.Equal(t, got.WorkflowCreatedAt, run.CreatedAt, "the trigger's workflowCreatedAt is the run's")
		host.assertAllOK(t, "/wf/interop/ts-three", runID)
	})

	// The same for a route served by the Go SDK.
	t.Run("RESTTriggerRunsGoWorkflow", func(t *testing.T) {
		runID := "wfr_rest-go-" + randomTag(t)
		restTrigger(t, p, wf.URL+"/wf/go-three", runID, `{"n":4}`, "Upstash-Forward-X-Interop", "rest-go")
		run := interopWaitRun(t, client, runID, "RUN_SUCCESS", func() string { return wf.describe("/wf/go-three") })
		require.NotNil(t, run.Response, interopDescribeRun(run))
		assert.JSONEq(t, `{"from":"go-three","a":5,"b":50,"hdr":"rest-go"}`, *run.Response)
		interopAssertSteps(t, run, []string{"go-1", "go-2", "go-3"})
		wf.assertAllOK(t, "/wf/go-three", runID)
	})

	t.Run("GoWorkflowInvokesTSWorkflow", func(t *testing.T) {
		k := randomTag(t)
		mu.Lock()
		invokeHdr, invokeChildID = "invoke-"+k, "wfr_ts-child-"+k
		mu.Unlock()
		res, err := client.Trigger(context.Background(), sdk.TriggerRequest{URL: wf.URL + "/wf/go-parent", BodyJSON: map[string]any{}})
		require.NoError(t, err)
		describe := func() string {
			return wf.describe("/wf/go-parent") + " | child: " + host.describe(t, "/wf/interop/ts-flow")
		}
		run := interopWaitRun(t, client, res.RunID, "RUN_SUCCESS", describe)
		require.NotNil(t, run.Response, interopDescribeRun(run))
		var got struct {
			Child      string `json:"child"`
			IsFailed   bool   `json:"isFailed"`
			IsCanceled bool   `json:"isCanceled"`
		}
		require.NoError(t, json.Unmarshal([]byte(*run.Response), &got), *run.Response)
		assert.False(t, got.IsFailed, *run.Response)
		assert.False(t, got.IsCanceled, *run.Response)
		assert.JSONEq(t, fmt.Sprintf(`{"from":"ts","doubled":10,"left":"L10","right":{"r":11},"hdr":"invoke-%s","name":"invoked-by-go"}`, k),
			got.Child, "the TS child's result as the Go parent's Invoke got it")
		interopAssertSteps(t, run, []string{"go-prep", "go-invoke-ts"})
		assert.Equal(t, "Invoke", interopStep(run, "go-invoke-ts").StepType(), interopDescribeRun(run))

		child := interopWaitRun(t, client, invokeChildID, "RUN_SUCCESS", describe)
		require.NotNil(t, child.Invoker, "the TS child run names its invoker: %s", interopDescribeRun(child))
		assert.Equal(t, res.RunID, child.Invoker.RunID, "invoker run id")
		assert.Equal(t, tsFlowURL, child.URL, "child workflow URL")
		interopAssertSteps(t, child, []string{"ts-double", "ts-nap", "ts-left", "ts-right", "ts-final"})
		wf.assertAllOK(t, "/wf/go-parent", res.RunID)
		host.assertAllOK(t, "/wf/interop/ts-flow", invokeChildID)
	})

	t.Run("TSWorkflowInvokesGoWorkflow", func(t *testing.T) {
		k := randomTag(t)
		childID := "wfr_go-child-" + k
		res, err := client.Trigger(context.Background(), sdk.TriggerRequest{URL: host.Base + "/wf/interop/ts-parent",
			BodyJSON: map[string]any{"n": 7, "hdr": "ts-to-go-" + k, "childRunId": strings.TrimPrefix(childID, "wfr_")}})
		require.NoError(t, err)
		describe := func() string {
			return host.describe(t, "/wf/interop/ts-parent") + " | child (via proxy): " + host.describe(t, "/wf/interop/go-child") +
				" | go handler: " + wf.describe("/wf/go-child")
		}
		run := interopWaitRun(t, client, res.RunID, "RUN_SUCCESS", describe)
		require.NotNil(t, run.Response, interopDescribeRun(run))
		assert.JSONEq(t, fmt.Sprintf(`{"from":"ts-parent","child":{"body":{"from":"go-child","tripled":21,"hdr":"ts-to-go-%s"},"isFailed":false,"isCanceled":false}}`, k),
			*run.Response, "the TS parent's result: what context.invoke returned for the Go child")
		interopAssertSteps(t, run, []string{"invoke-go", "ts-after"})
		assert.Equal(t, "Invoke", interopStep(run, "invoke-go").StepType(), interopDescribeRun(run))

		child := interopWaitRun(t, client, childID, "RUN_SUCCESS", describe)
		require.NotNil(t, child.Invoker, "the Go child run names its invoker: %s", interopDescribeRun(child))
		assert.Equal(t, res.RunID, child.Invoker.RunID, "invoker run id")
		assert.Equal(t, host.Base+"/wf/interop/go-child", child.URL, "child workflow URL (derived by the TS SDK from the parent URL)")
		interopAssertSteps(t, child, []string{"go-triple"})
		mu.Lock()
		assert.Equal(t, 1, childRuns, "go-triple ran exactly once")
		mu.Unlock()
		host.assertAllOK(t, "/wf/interop/ts-parent", res.RunID)
		host.assertAllOK(t, "/wf/interop/go-child", childID)
		wf.assertAllOK(t, "/wf/go-child", childID)
	})
}

// TestInteropReceivers: the Go Client publishes to a Go endpoint verifying with sdk.Receiver
// and to a Node endpoint verifying with the official @upstash/qstash Receiver (subject checked
// against the URL on both); both accept every delivery. Replaying a delivery with a tampered
// body or signature is rejected by both, while replaying it untouched is accepted (so the
// rejection is due to the tampering).
func TestInteropReceivers(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the duraton binary and Node")
	}
	dir, node := compatDir(t)
	p := startDuraton(t, t.TempDir())
	client := interopClient(t, p)
	host := startInteropHost(t, node, dir, p)
	receiver := &sdk.Receiver{CurrentSigningKey: p.CurrentSigningKey, NextSigningKey: p.NextSigningKey}

	type goDelivery struct {
		url, body, signature, messageID string
		err                             error
	}
	var mu sync.Mutex
	var goDeliveries []goDelivery
	var goURL string
	goSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := goDelivery{url: goURL + r.RequestURI, body: string(body), signature: r.Header.Get("Upstash-Signature"),
			messageID: r.Header.Get("Upstash-Message-Id")}
		d.err = receiver.Verify(d.signature, body, d.url)
		mu.Lock()
		goDeliveries = append(goDeliveries, d)
		mu.Unlock()
		if d.err != nil {
			http.Error(w, d.err.Error(), http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(goSrv.Close)
	goURL = goSrv.URL
	goSnapshot := func() []goDelivery {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(goDeliveries)
	}

	k := randomTag(t)
	bodies := []struct {
		body, contentType string
	}{
		{fmt.Sprintf(`{"i":0,"k":%q,"text":"héllo ✓"}`, k), "application/json"},
		{"plain text 1 " + k + " — ünïcödé", "text/plain"},
		{"", ""},
		{strings.Repeat("x", 64<<10) + k, "application/octet-stream"},
	}
	type published struct{ dest, body, messageID string }
	var sent []published
	for _, base := range []string{goURL, host.Base} {
		for i, b := range bodies {
			dest := fmt.Sprintf("%s/recv?k=%s&i=%d", base, k, i)
			res, err := client.Publish(context.Background(), sdk.PublishRequest{URL: dest, Body: []byte(b.body), ContentType: b.contentType,
				Headers: http.Header{"X-Interop": {k}}})
			require.NoError(t, err, "publish to %s", dest)
			require.NotEmpty(t, res.MessageID)
			sent = append(sent, published{dest: dest, body: b.body, messageID: res.MessageID})
		}
	}

	// Every message reaches its endpoint once, verified; no rejected delivery at all.
	for _, s := range sent {
		if strings.HasPrefix(s.dest, goURL) {
			var got goDelivery
			interopPoll(t, "Go endpoint delivery of "+s.messageID, func() bool {
				for _, d := range goSnapshot() {
					if d.messageID == s.messageID {
						got = d
						return true
					}
				}
				return false
			}, nil)
			require.NoError(t, got.err, "sdk.Receiver rejected delivery %s to %s", s.messageID, s.dest)
			assert.Equal(t, s.dest, got.url)
			assert.Equal(t, s.body, got.body, "body of %s", s.messageID)
		} else {
			ev := host.waitEvent(t, "Node endpoint delivery of "+s.messageID, func(e interopEvent) bool {
				return e.Event == "verify" && e.MessageID == s.messageID
			})
			require.True(t, ev.Valid, "the official Receiver rejected delivery %s to %s: %s", s.messageID, s.dest, ev.Error)
			assert.Equal(t, s.dest, ev.URL)
			assert.Equal(t, s.body, ev.Body, "body of %s", s.messageID)
		}
	}
	for _, d := range goSnapshot() {
		assert.NoError(t, d.err, "Go endpoint: delivery %s to %s rejected", d.messageID, d.url)
	}
	for _, e := range host.eventsWhere(func(e interopEvent) bool { return e.Event == "verify" }) {
		assert.True(t, e.Valid, "Node endpoint: delivery %s to %s rejected: %s", e.MessageID, e.URL, e.Error)
	}

	// Replays of a captured delivery: untouched (accepted), tampered body, tampered signature.
	hc := newAPIClient(t, 10*time.Second)
	replay := func(url, signature, body string) int {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Upstash-Signature", signature)
		req.Header.Set("Upstash-Message-Id", "msg_replay_"+randomTag(t))
		resp, err := hc.Do(req)
		require.NoError(t, err, "replay to %s", url)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	tamperSig := func(sig string) string {
		// Flip one character of the JWT's signature part (the last segment).
		last := sig[len(sig)-2]
		repl := byte('A')
		if last == 'A' {
			repl = 'B'
		}
		return sig[:len(sig)-2] + string(repl) + sig[len(sig)-1:]
	}
	cases := []struct {
		name       string
		body, sig  func(body, sig string) string
		wantStatus int
	}{
		{"untouched", func(b, _ string) string { return b }, func(_, s string) string { return s }, http.StatusOK},
		{"tampered body", func(b, _ string) string { return b + " " }, func(_, s string) string { return s }, http.StatusUnauthorized},
		{"body of another message", func(_, _ string) string { return `{"i":0}` }, func(_, s string) string { return s }, http.StatusUnauthorized},
		{"tampered signature", func(b, _ string) string { return b }, func(_, s string) string { return tamperSig(s) }, http.StatusUnauthorized},
		{"no signature", func(b, _ string) string { return b }, func(_, _ string) string { return "" }, http.StatusUnauthorized},
	}

	orig := goSnapshot()[0]
	for _, c := range cases {
		before := len(goSnapshot())
		status := replay(orig.url, c.sig(orig.body, orig.signature), c.body(orig.body, orig.signature))
		assert.Equal(t, c.wantStatus, status, "Go endpoint, %s replay", c.name)
		all := goSnapshot()
		require.Len(t, all, before+1, "the replay reached the Go endpoint")
		if c.wantStatus == http.StatusOK {
			assert.NoError(t, all[before].err, "Go endpoint, %s replay", c.name)
		} else {
			assert.Error(t, all[before].err, "Go endpoint, %s replay", c.name)
		}
	}

	nodeOrig := host.waitEvent(t, "a Node delivery", func(e interopEvent) bool { return e.Event == "verify" && e.Valid && e.Body != "" })
	for _, c := range cases {
		sig := c.sig(nodeOrig.Body, nodeOrig.Signature)
		body := c.body(nodeOrig.Body, nodeOrig.Signature)
		status := replay(nodeOrig.URL, sig, body)
		assert.Equal(t, c.wantStatus, status, "Node endpoint, %s replay", c.name)
		ev := host.waitEvent(t, "the Node endpoint's verdict on the "+c.name+" replay", func(e interopEvent) bool {
			return e.Event == "verify" && strings.HasPrefix(e.MessageID, "msg_replay_") && e.Signature == sig && e.Body == body
		})
		assert.Equal(t, c.wantStatus == http.StatusOK, ev.Valid, "official Receiver verdict on the %s replay (error: %s)", c.name, ev.Error)
	}
}

// --- helpers --------------------------------------------------------------------------

// interopClient is a Go SDK client for p whose idle connections are closed after the test.
func interopClient(t *testing.T, p *proc) *sdk.Client {
	t.Helper()
	c, err := sdk.NewClient(sdk.WithBaseURL(p.URL), sdk.WithToken(p.Token),
		sdk.WithHTTPClient(newAPIClient(t, 30*time.Second)), sdk.WithEnv(func(string) string { return "" }))
	require.NoError(t, err)
	return c
}

// interopEnv returns a getenv over p's QSTASH_* variables only.
func interopEnv(p *proc) func(string) string {
	m := map[string]string{}
	for _, kv := range p.Env() {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// interopPoll waits until cond holds (the processes' APIs are polled), failing after
// interopWait with describe().
func interopPoll(t *testing.T, what string, cond func() bool, describe func() string) {
	t.Helper()
	if describe == nil {
		deliverytest.Eventually(t, interopWait, what, cond)
		return
	}
	deliverytest.Eventually(t, interopWait, what, cond, describe)
}

// interopWaitRun polls the run logs until runID is terminal and checks it ended as want.
func interopWaitRun(t *testing.T, client *sdk.Client, runID, want string, describe func() string) sdk.RunLog {
	t.Helper()
	var last sdk.RunLog
	var lastErr error
	interopPoll(t, fmt.Sprintf("run %s to end (want %s)", runID, want), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		page, err := client.RunLogs(ctx, sdk.RunLogsRequest{RunID: runID})
		if lastErr = err; err != nil {
			return false
		}
		for _, r := range page.Runs {
			if r.RunID == runID {
				last = r
				return r.State == "RUN_SUCCESS" || r.State == "RUN_FAILED" || r.State == "RUN_CANCELED"
			}
		}
		return false
	}, func() string {
		s := interopDescribeRun(last)
		if lastErr != nil {
			s += " (last error: " + lastErr.Error() + ")"
		}
		if describe != nil {
			s += " | " + describe()
		}
		return s
	})
	if last.State != want {
		extra := ""
		if describe != nil {
			extra = " | " + describe()
		}
		t.Fatalf("run %s ended as %s, want %s: %s%s", runID, last.State, want, interopDescribeRun(last), extra)
	}
	t.Logf("run %s", interopDescribeRun(last))
	return last
}

// restTriggerResponse is the answer to POST /v2/trigger/{url}.
type restTriggerResponse struct {
	WorkflowRunID     string `json:"workflowRunId"`
	MessageID         string `json:"messageId"`
	WorkflowCreatedAt int64  `json:"workflowCreatedAt"`
}

// restTrigger starts a run over REST without an SDK, as curl would: POST /v2/trigger/{url}
// with the run id and the given header name/value pairs. It checks the 201 answer.
func restTrigger(t *testing.T, p *proc, url, runID, body string, header ...string) restTriggerResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL+"/v2/trigger/"+url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+p.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Upstash-Workflow-RunId", runID)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := newAPIClient(t, 30*time.Second).Do(req)
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", raw)
	var got restTriggerResponse
	require.NoError(t, json.Unmarshal(raw, &got), "%s", raw)
	assert.Equal(t, runID, got.WorkflowRunID)
	assert.NotEmpty(t, got.MessageID)
	assert.Positive(t, got.WorkflowCreatedAt, "workflowCreatedAt: %s", raw)
	return got
}

// interopSteps flattens a run log's groups, without the Initial entry and the plan steps.
func interopSteps(run sdk.RunLog) []sdk.StepLog {
	var out []sdk.StepLog
	for _, g := range run.Steps {
		for _, s := range g.Steps {
			if s.StepType() != "Initial" && s.StepID() != 0 {
				out = append(out, s)
			}
		}
	}
	return out
}

func interopStep(run sdk.RunLog, name string) sdk.StepLog {
	for _, s := range interopSteps(run) {
		if s.StepName() == name {
			return s
		}
	}
	return sdk.StepLog{}
}

func interopDescribeRun(run sdk.RunLog) string {
	if run.RunID == "" {
		return "run not in the logs yet"
	}
	var steps []string
	for _, g := range run.Steps {
		for _, s := range g.Steps {
			p := ""
			if g.Type == "parallel" {
				p = "(p)"
			}
			steps = append(steps, fmt.Sprintf("%d:%s/%s%s", s.StepID(), s.StepName(), s.StepType(), p))
		}
	}
	resp := ""
	if run.Response != nil {
		resp = " response=" + *run.Response
	}
	return fmt.Sprintf("%s %s steps=[%s]%s", run.RunID, run.State, strings.Join(steps, " "), resp)
}

// interopAssertSteps checks that the run recorded exactly these result steps, each once, with
// stepIds 1..n in this order.
func interopAssertSteps(t *testing.T, run sdk.RunLog, names []string) {
	t.Helper()
	steps := interopSteps(run)
	got := make([]string, len(steps))
	for i, s := range steps {
		got[i] = s.StepName()
	}
	ids := map[string]int{}
	for _, s := range steps {
		ids[s.StepName()] = s.StepID()
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	want := slices.Clone(names)
	slices.Sort(want)
	if !assert.Equal(t, want, sorted, "recorded steps: %s", interopDescribeRun(run)) {
		return
	}
	for i, n := range names {
		assert.Equal(t, i+1, ids[n], "stepId of %s: %s", n, interopDescribeRun(run))
	}
}

// interopAssertParallel checks that the named steps were logged in one parallel group.
func interopAssertParallel(t *testing.T, run sdk.RunLog, names ...string) {
	t.Helper()
	for _, g := range run.Steps {
		if g.Type != "parallel" {
			continue
		}
		var in []string
		for _, s := range g.Steps {
			if s.StepID() != 0 {
				in = append(in, s.StepName())
			}
		}
		slices.Sort(in)
		want := slices.Clone(names)
		slices.Sort(want)
		if slices.Equal(in, want) {
			return
		}
	}
	t.Errorf("no parallel group holding exactly %v: %s", names, interopDescribeRun(run))
}

// --- Go workflows ---------------------------------------------------------------------

// interopGoWorkflows is an httptest server on 127.0.0.1 serving sdk.Serve workflows (verification
// on, with the duraton process's signing keys) and recording every request and answer.
type interopGoWorkflows struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []interopGoRequest
}

type interopGoRequest struct {
	path, runID, messageID string
	signed                 bool
	status                 int // 0 while the request is being handled
	respBody               string
}

func startInteropGoWorkflows(t *testing.T, p *proc, routes map[string]sdk.RouteFunc) *interopGoWorkflows {
	t.Helper()
	g := &interopGoWorkflows{}
	mux := http.NewServeMux()
	for path, route := range routes {
		opts := []sdk.ServeOption{sdk.WithServeEnv(interopEnv(p))}
		if path == "/wf/go-child" {
			// Reached through the Node host's reverse proxy, whose URL (the one Duraton
			// signs) is known only after this server started.
			opts = append(opts, sdk.WithoutSubjectCheck())
		}
		h := sdk.Serve(route, opts...)
		mux.Handle(path, g.record(path, h))
	}
	g.Server = httptest.NewServer(mux)
	t.Cleanup(g.Close)
	// sdk.Serve's own client uses http.DefaultTransport: drop its idle connections (goleak).
	t.Cleanup(func() { http.DefaultTransport.(*http.Transport).CloseIdleConnections() })
	return g
}

func (g *interopGoWorkflows) record(path string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		i := len(g.reqs)
		g.reqs = append(g.reqs, interopGoRequest{path: path, runID: r.Header.Get("Upstash-Workflow-Runid"),
			messageID: r.Header.Get("Upstash-Message-Id"), signed: r.Header.Get("Upstash-Signature") != ""})
		g.mu.Unlock()
		rw := &interopRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rw, r)
		g.mu.Lock()
		g.reqs[i].status, g.reqs[i].respBody = rw.status, rw.body.String()
		g.mu.Unlock()
	})
}

func (g *interopGoWorkflows) requests(path, runID string) []interopGoRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []interopGoRequest
	for _, r := range g.reqs {
		if r.path == path && (runID == "" || r.runID == runID) {
			out = append(out, r)
		}
	}
	return out
}

func (g *interopGoWorkflows) describe(path string) string {
	var parts []string
	for _, r := range g.requests(path, "") {
		parts = append(parts, fmt.Sprintf("[%s %d %s]", r.runID, r.status, interopShort(r.respBody, 160)))
	}
	return fmt.Sprintf("%d requests to Go %s: %s", len(parts), path, strings.Join(parts, " "))
}

// assertAllOK waits until no request of the run to path is still being handled (the last
// delivery answers after the run ended), then checks that every one was signed and
// answered 200 (a failed verification would be a 500).
func (g *interopGoWorkflows) assertAllOK(t *testing.T, path, runID string) {
	t.Helper()
	interopPoll(t, "the Go workflow's deliveries to be answered", func() bool {
		return !slices.ContainsFunc(g.requests(path, runID), func(r interopGoRequest) bool { return r.status == 0 })
	}, func() string { return g.describe(path) })
	reqs := g.requests(path, runID)
	require.NotEmpty(t, reqs, "no delivery of %s reached Go %s", runID, path)
	for _, r := range reqs {
		assert.True(t, r.signed, "delivery %s without Upstash-Signature", r.messageID)
		assert.Equal(t, http.StatusOK, r.status, "delivery %s to Go %s answered %d: %s", r.messageID, path, r.status, r.respBody)
	}
}

type interopRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *interopRecorder) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *interopRecorder) Write(p []byte) (int, error) {
	w.body.Write(p)
	return w.ResponseWriter.Write(p)
}

func interopShort(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// --- Node processes -------------------------------------------------------------------

// interopEvent is one JSON line of testdata/compat/interop/host.mjs (fields per event kind).
type interopEvent struct {
	Event         string `json:"event"`
	Base          string `json:"base"`
	URL           string `json:"url"`
	Body          string `json:"body"`
	Signature     string `json:"signature"`
	MessageID     string `json:"messageId"`
	Valid         bool   `json:"valid"`
	Error         string `json:"error"`
	Status        int    `json:"status"`
	RunID         string `json:"runId"`
	WorkflowRunID string `json:"workflowRunId"`
}

// interopHost is a running interop/host.mjs.
type interopHost struct {
	Base string

	mu       sync.Mutex
	events   []interopEvent
	readDone chan struct{}
	hc       *http.Client
}

// startInteropHost starts interop/host.mjs with p's credentials (plus extra env), waits for its
// ready line and stops it (stdin closed, then SIGKILL if it lingers) when the test ends.
func startInteropHost(t *testing.T, node, dir string, p *proc, extra ...string) *interopHost {
	t.Helper()
	cmd := exec.Command(node, filepath.Join("interop", "host.mjs"))
	cmd.Dir = dir
	cmd.Env = append(append(sdkEnv(os.Environ()), p.Env()...), extra...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &lineLogger{t: t}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start(), "start node interop/host.mjs")
	h := &interopHost{readDone: make(chan struct{}), hc: newAPIClient(t, 10*time.Second)}
	go func() {
		defer close(h.readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var ev interopEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Event == "" {
				t.Logf("host.mjs: %s", sc.Text())
				continue
			}
			h.mu.Lock()
			h.events = append(h.events, ev)
			h.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-h.readDone:
		case <-time.After(10 * time.Second):
			t.Errorf("node interop/host.mjs did not exit within 10s of stdin closing: killing it")
			_ = cmd.Process.Kill()
			<-h.readDone
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("node interop/host.mjs exited with %v", err)
		}
		stderr.Flush()
	})
	ready := h.waitEvent(t, "host.mjs ready line", func(e interopEvent) bool { return e.Event == "ready" })
	require.True(t, strings.HasPrefix(ready.Base, "http://127.0.0.1:"), "host base %q", ready.Base)
	h.Base = ready.Base
	return h
}

func (h *interopHost) eventsWhere(pred func(interopEvent) bool) []interopEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []interopEvent
	for _, e := range h.events {
		if pred(e) {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent returns the first event matching pred, waiting up to interopWait (failing early
// when the Node process ended).
func (h *interopHost) waitEvent(t *testing.T, what string, pred func(interopEvent) bool) interopEvent {
	t.Helper()
	var got interopEvent
	interopPoll(t, what, func() bool {
		if es := h.eventsWhere(pred); len(es) > 0 {
			got = es[0]
			return true
		}
		select {
		case <-h.readDone:
			t.Fatalf("node interop/host.mjs ended while waiting for %s", what)
		default:
		}
		return false
	}, nil)
	return got
}

// interopHostRequest is one request host.mjs recorded on a path (GET /stats).
type interopHostRequest struct {
	Status    int    `json:"status"`
	RunID     string `json:"runId"`
	MessageID string `json:"messageId"`
	Signed    bool   `json:"signed"`
	RespBody  string `json:"respBody"`
}

func (h *interopHost) stats(path string) ([]interopHostRequest, error) {
	resp, err := h.hc.Get(h.Base + "/stats?path=" + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []interopHostRequest
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /stats: %s", resp.Status)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

func (h *interopHost) describe(t *testing.T, path string) string {
	reqs, err := h.stats(path)
	if err != nil {
		return "stats of " + path + ": " + err.Error()
	}
	var parts []string
	for _, r := range reqs {
		parts = append(parts, fmt.Sprintf("[%s %d %s]", r.RunID, r.Status, interopShort(r.RespBody, 160)))
	}
	return fmt.Sprintf("%d requests to Node %s: %s", len(reqs), path, strings.Join(parts, " "))
}

// assertAllOK is interopGoWorkflows.assertAllOK for a path of the Node host (serve() answers a
// delivery that fails its signature verification with an error status).
func (h *interopHost) assertAllOK(t *testing.T, path, runID string) {
	t.Helper()
	var reqs []interopHostRequest
	interopPoll(t, "the Node workflow's deliveries to be answered", func() bool {
		all, err := h.stats(path)
		if err != nil {
			return false
		}
		reqs = reqs[:0]
		for _, r := range all {
			if r.RunID == runID {
				reqs = append(reqs, r)
			}
		}
		return !slices.ContainsFunc(reqs, func(r interopHostRequest) bool { return r.Status == 0 })
	}, func() string { return h.describe(t, path) })
	require.NotEmpty(t, reqs, "no delivery of %s reached Node %s", runID, path)
	for _, r := range reqs {
		assert.True(t, r.Signed, "delivery %s without Upstash-Signature", r.MessageID)
		assert.Equal(t, http.StatusOK, r.Status, "delivery %s to Node %s answered %d: %s", r.MessageID, path, r.Status, r.RespBody)
	}
}

// interopTriggerFromTS runs interop/trigger.mjs (the official workflow Client.trigger) and returns
// the run id it printed.
func interopTriggerFromTS(t *testing.T, node, dir string, p *proc, url, body string, headers map[string]string, runID string) string {
	t.Helper()
	hdrs, err := json.Marshal(headers)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), interopWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("interop", "trigger.mjs"))
	cmd.Dir = dir
	cmd.Env = append(append(sdkEnv(os.Environ()), p.Env()...),
		"INTEROP_URL="+url, "INTEROP_BODY="+body, "INTEROP_HEADERS="+string(hdrs), "INTEROP_RUN_ID="+runID)
	var stdout bytes.Buffer
	stderr := &lineLogger{t: t}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	stderr.Flush()
	require.NoError(t, err, "node interop/trigger.mjs (stdout: %s)", stdout.String())
	for _, line := range strings.Split(stdout.String(), "\n") {
		var ev interopEvent
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "triggered" {
			require.True(t, strings.HasPrefix(ev.WorkflowRunID, "wfr_"), "run id %q", ev.WorkflowRunID)
			return ev.WorkflowRunID
		}
	}
	t.Fatalf("interop/trigger.mjs printed no run id: %s", stdout.String())
	return ""
}

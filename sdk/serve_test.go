package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/server/servertest"
)

// waitFor bounds every wait for an asynchronous effect (a run's end, a waiter, a
// failure function); pollEvery is the pause between two polls.
const (
	waitFor   = 20 * time.Second
	pollEvery = 20 * time.Millisecond
)

// harness is a real Duraton (servertest) plus an HTTP server on loopback that serves
// workflow routes with sdk.Serve, and a Client to trigger and observe runs.
type harness struct {
	srv    *servertest.Server
	client *sdk.Client
	mux    *http.ServeMux
	app    *httptest.Server

	mu         sync.Mutex
	deliveries map[string][]delivery // by mounted path
	inFlight   atomic.Int32          // requests to mounted routes not yet recorded
}

// delivery is one request a mounted route received, and its answer.
type delivery struct {
	Retried  int
	Callback string // "", "call" or "failure"
	Status   int
	Body     string
	At       time.Time
}

func newHarness() (*harness, error) {
	srv, err := servertest.Start(servertest.Options{})
	if err != nil {
		return nil, err
	}
	client, err := sdk.NewClient(sdk.WithEnv(srv.Env()))
	if err != nil {
		srv.Close()
		return nil, err
	}
	h := &harness{srv: srv, client: client, mux: http.NewServeMux(), deliveries: map[string][]delivery{}}
	h.app = httptest.NewServer(h.mux) // 127.0.0.1
	return h, nil
}

// startHarness is newHarness for a test, closed at its end.
func startHarness(t *testing.T) *harness {
	t.Helper()
	h, err := newHarness()
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h
}

func (h *harness) Close() {
	h.app.Close()
	h.srv.Close()
}

// Mount serves route at path (signed deliveries only, with the server's credentials) and
// returns its URL.
func (h *harness) Mount(path string, route sdk.RouteFunc, opts ...sdk.ServeOption) string {
	handler := sdk.Serve(route, append([]sdk.ServeOption{sdk.WithServeEnv(h.srv.Env())}, opts...)...)
	h.mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		rec := httptest.NewRecorder()
		at := time.Now()
		handler.ServeHTTP(rec, r)
		d := delivery{Status: rec.Code, Body: rec.Body.String(), At: at}
		fmt.Sscan(r.Header.Get("Upstash-Retried"), &d.Retried)
		switch {
		case r.Header.Get("Upstash-Workflow-Callback") == "true":
			d.Callback = "call"
		case r.Header.Get("Upstash-Workflow-Failure-Callback") == "true":
			d.Callback = "failure"
		}
		h.mu.Lock()
		h.deliveries[path] = append(h.deliveries[path], d)
		h.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	return h.app.URL + path
}

// Deliveries returns what path received so far, in the order the requests came. It
// waits for the requests under way (a run ends before its last delivery is answered).
func (h *harness) Deliveries(path string) []delivery {
	for deadline := time.Now().Add(waitFor); h.inFlight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	h.mu.Lock()
	ds := append([]delivery(nil), h.deliveries[path]...)
	h.mu.Unlock()
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].At.Before(ds[j].At) })
	return ds
}

// Trigger starts a run and returns its id.
func (h *harness) Trigger(req sdk.TriggerRequest) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	res, err := h.client.Trigger(ctx, req)
	return res.RunID, err
}

// Wait polls the run's log until the run has ended and returns it.
func (h *harness) Wait(runID string) (sdk.RunLog, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for {
		page, err := h.client.RunLogs(ctx, sdk.RunLogsRequest{RunID: runID})
		if err != nil {
			return sdk.RunLog{}, err
		}
		if len(page.Runs) == 1 && page.Runs[0].State != sdk.RunStarted {
			return page.Runs[0], nil
		}
		select {
		case <-ctx.Done():
			return sdk.RunLog{}, fmt.Errorf("run %s did not end: %w", runID, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// Run triggers a run and waits for its end.
func (h *harness) Run(req sdk.TriggerRequest) (sdk.RunLog, error) {
	runID, err := h.Trigger(req)
	if err != nil {
		return sdk.RunLog{}, err
	}
	return h.Wait(runID)
}

// mustRun is Run for a test.
func (h *harness) mustRun(t *testing.T, req sdk.TriggerRequest) sdk.RunLog {
	t.Helper()
	run, err := h.Run(req)
	require.NoError(t, err)
	return run
}

// response is the run's recorded result ("" when none).
func response(run sdk.RunLog) string {
	if run.Response == nil {
		return ""
	}
	return *run.Response
}

// eventually polls cond until it holds or waitFor passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deliverytest.Eventually(t, waitFor, what, cond)
}

// failureRecorder is a failure function that keeps what it was told.
type failureRecorder struct {
	mu    sync.Mutex
	calls []sdk.FailureContext
}

func (f *failureRecorder) fn(fc *sdk.FailureContext) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, *fc)
	return "handled", nil
}

func (f *failureRecorder) Calls() []sdk.FailureContext {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sdk.FailureContext(nil), f.calls...)
}

func TestServeSequentialSteps(t *testing.T) {
	t.Parallel()
	// With inline answers, the last step's delivery also ends the run; answered the
	// QStash way (API calls), one more delivery ends it.
	for _, mode := range []struct {
		name       string
		opts       []sdk.ServeOption
		deliveries int
	}{{"inline", nil, 3}, {"api", []sdk.ServeOption{sdk.WithoutInlineAnswers()}, 4}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testSequentialSteps(t, mode.opts, mode.deliveries)
		})
	}
}

func testSequentialSteps(t *testing.T, opts []sdk.ServeOption, deliveries int) {
	h := startHarness(t)
	var n1, n2, n3 atomic.Int32
	url := h.Mount("/seq", func(c *sdk.Context) (any, error) {
		var in struct{ N int }
		if err := c.DecodePayload(&in); err != nil {
			return nil, sdk.NonRetryable(err)
		}
		a, err := sdk.Run(c, "double", func() (int, error) { n1.Add(1); return in.N * 2, nil })
		if err != nil {
			return nil, err
		}
		b, err := sdk.Run(c, "add", func() (int, error) { n2.Add(1); return a + 3, nil })
		if err != nil {
			return nil, err
		}
		s, err := sdk.Run(c, "format", func() (string, error) { n3.Add(1); return fmt.Sprintf("%d->%d->%d", in.N, a, b), nil })
		if err != nil {
			return nil, err
		}
		return map[string]string{"result": s}, nil
	}, opts...)
	run := h.mustRun(t, sdk.TriggerRequest{URL: url, BodyJSON: map[string]int{"N": 5}})

	require.Equal(t, sdk.RunSuccess, run.State)
	require.JSONEq(t, `{"result":"5->10->13"}`, response(run), "the route's result is the run's response")
	require.Equal(t, []int32{1, 1, 1}, []int32{n1.Load(), n2.Load(), n3.Load()}, "each step function runs exactly once")
	ds := h.Deliveries("/seq")
	require.Len(t, ds, deliveries)
	for _, d := range ds {
		require.Equal(t, http.StatusOK, d.Status, d.Body)
	}
}

func TestServeLabelsAndHeaders(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	type seen struct {
		RunID   string
		Labels  []string
		Tenant  string
		Created time.Time
	}
	var mu sync.Mutex
	var deliveries []seen
	url := h.Mount("/labels", func(c *sdk.Context) (any, error) {
		mu.Lock()
		deliveries = append(deliveries, seen{c.RunID, c.Labels, c.Headers.Get("X-Tenant"), c.RunCreatedAt})
		mu.Unlock()
		if _, err := sdk.Run(c, "one", func() (int, error) { return 1, nil }); err != nil {
			return nil, err
		}
		if _, err := sdk.Run(c, "two", func() (int, error) { return 2, nil }); err != nil {
			return nil, err
		}
		return nil, nil
	})
	runID, err := h.Trigger(sdk.TriggerRequest{URL: url, Labels: []string{"billing", "eu"}, Headers: http.Header{"X-Tenant": {"acme"}}})
	require.NoError(t, err)
	run, err := h.Wait(runID)
	require.NoError(t, err)
	require.Equal(t, sdk.RunSuccess, run.State)
	require.Empty(t, response(run), "a route returning nil records no response")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, deliveries, 2, "two steps: the second one's delivery also ends the run (inline answer)")
	for i, d := range deliveries {
		require.Equal(t, runID, d.RunID, "delivery %d", i)
		require.Equal(t, []string{"billing", "eu"}, d.Labels, "delivery %d", i)
		require.Equal(t, "acme", d.Tenant, "delivery %d", i)
		require.WithinDuration(t, time.Now(), d.Created, time.Minute, "delivery %d", i)
	}
}

func TestServeParallel(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	var na, nb, nc, nAfter atomic.Int32
	url := h.Mount("/par", func(c *sdk.Context) (any, error) {
		a := sdk.Go("a", func() (string, error) { na.Add(1); return "A", nil })
		b := sdk.Go("b", func() (int, error) { nb.Add(1); return 2, nil })
		cc := sdk.Go("c", func() ([]string, error) { nc.Add(1); return []string{"c1", "c2"}, nil })
		if err := c.Parallel(a, b, cc); err != nil {
			return nil, err
		}
		joined, err := sdk.Run(c, "join", func() (string, error) {
			nAfter.Add(1)
			return fmt.Sprintf("%s|%d|%s", a.Result(), b.Result(), strings.Join(cc.Result(), ",")), nil
		})
		if err != nil {
			return nil, err
		}
		return joined, nil
	})
	run := h.mustRun(t, sdk.TriggerRequest{URL: url})

	require.Equal(t, sdk.RunSuccess, run.State)
	require.Equal(t, `"A|2|c1,c2"`, response(run))
	require.Equal(t, []int32{1, 1, 1, 1}, []int32{na.Load(), nb.Load(), nc.Load(), nAfter.Load()}, "each branch and the step after run once")
	var parallel int
	for _, g := range run.Steps {
		if g.Type == "parallel" {
			parallel++
		}
	}
	require.GreaterOrEqual(t, parallel, 1, "the log shows a parallel group: %+v", run.Steps)
}

func TestServeSleep(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	type result struct {
		Slept        int64 // ms between the steps around Sleep
		Until        int64 // unix s SleepUntil waited for
		AfterUntilMs int64 // when the step after SleepUntil ran, unix ms
	}
	url := h.Mount("/sleep", func(c *sdk.Context) (any, error) {
		before, err := sdk.Run(c, "before", func() (int64, error) { return time.Now().UnixMilli(), nil })
		if err != nil {
			return nil, err
		}
		if err := c.Sleep("nap", time.Second); err != nil {
			return nil, err
		}
		after, err := sdk.Run(c, "after", func() (int64, error) { return time.Now().UnixMilli(), nil })
		if err != nil {
			return nil, err
		}
		// The target is computed in a step, so every delivery sees the same one.
		until, err := sdk.Run(c, "target", func() (int64, error) { return time.Now().Add(2 * time.Second).Unix(), nil })
		if err != nil {
			return nil, err
		}
		if err := c.SleepUntil("until", time.Unix(until, 0)); err != nil {
			return nil, err
		}
		woke, err := sdk.Run(c, "woke", func() (int64, error) { return time.Now().UnixMilli(), nil })
		if err != nil {
			return nil, err
		}
		return result{Slept: after - before, Until: until, AfterUntilMs: woke}, nil
	})
	run := h.mustRun(t, sdk.TriggerRequest{URL: url})
	require.Equal(t, sdk.RunSuccess, run.State)
	var res result
	require.NoError(t, json.Unmarshal([]byte(response(run)), &res))
	require.GreaterOrEqual(t, res.Slept, int64(950), "Sleep(1s) lasts about a second at least")
	require.GreaterOrEqual(t, res.AfterUntilMs, res.Until*1000, "SleepUntil resumes at its time at the earliest")
}

func TestServeCall(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	var gotMethod, gotBody, gotHeader atomic.Value
	third := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		gotMethod.Store(r.Method)
		gotBody.Store(string(body))
		gotHeader.Store(r.Header.Get("X-Api-Key"))
		w.Header().Set("X-Reply", "yes")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"echo":`+string(body)+`}`)
	}))
	t.Cleanup(third.Close)

	type result struct {
		OKStatus      int
		OKBody        string
		OKHeader      string
		MissingStatus int
	}
	url := h.Mount("/call", func(c *sdk.Context) (any, error) {
		ok, err := c.Call("ok", sdk.CallRequest{URL: third.URL + "/ok", Method: http.MethodPut, Body: []byte(`{"n":1}`),
			Header: http.Header{"X-Api-Key": {"k1"}}})
		if err != nil {
			return nil, err
		}
		missing, err := c.Call("missing", sdk.CallRequest{URL: third.URL + "/nope", Method: http.MethodGet})
		if err != nil {
			return nil, err
		}
		return result{ok.Status, string(ok.Body), strings.Join(ok.Header["X-Reply"], ","), missing.Status}, nil
	})
	run := h.mustRun(t, sdk.TriggerRequest{URL: url})
	require.Equal(t, sdk.RunSuccess, run.State)
	var res result
	require.NoError(t, json.Unmarshal([]byte(response(run)), &res))
	require.Equal(t, result{OKStatus: 201, OKBody: `{"echo":{"n":1}}`, OKHeader: "yes", MissingStatus: 404}, res)
	require.Equal(t, http.MethodPut, gotMethod.Load())
	require.Equal(t, `{"n":1}`, gotBody.Load())
	require.Equal(t, "k1", gotHeader.Load(), "the call's headers reach the third party")
}

func TestServeInvoke(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	var cancelledAfter atomic.Int32
	okURL := h.Mount("/child-ok", func(c *sdk.Context) (any, error) {
		s, err := sdk.Run(c, "greet", func() (string, error) { return "hello " + string(c.Payload()), nil })
		if err != nil {
			return nil, err
		}
		return map[string]string{"greeting": s}, nil
	})
	failURL := h.Mount("/child-fail", func(c *sdk.Context) (any, error) {
		return nil, sdk.NonRetryable(errors.New("child broke"))
	})
	cancelURL := h.Mount("/child-cancel", func(c *sdk.Context) (any, error) {
		if err := c.Cancel(); err != nil {
			return nil, err
		}
		cancelledAfter.Add(1)
		return nil, nil
	})
	type result struct {
		OKBody                     string
		OKFailed, OKCanceled       bool
		FailBody                   string
		FailFailed, FailCanceled   bool
		CancelFailed, CancelCancel bool
	}
	parentURL := h.Mount("/parent", func(c *sdk.Context) (any, error) {
		ok, err := c.Invoke("ok", sdk.InvokeRequest{URL: okURL, Body: []byte("ada")})
		if err != nil {
			return nil, err
		}
		failed, err := c.Invoke("fail", sdk.InvokeRequest{URL: failURL})
		if err != nil {
			return nil, err
		}
		cancelled, err := c.Invoke("cancel", sdk.InvokeRequest{URL: cancelURL})
		if err != nil {
			return nil, err
		}
		return result{string(ok.Body), ok.IsFailed, ok.IsCanceled, string(failed.Body), failed.IsFailed, failed.IsCanceled,
			cancelled.IsFailed, cancelled.IsCanceled}, nil
	})
	run := h.mustRun(t, sdk.TriggerRequest{URL: parentURL})
	require.Equal(t, sdk.RunSuccess, run.State)
	var res result
	require.NoError(t, json.Unmarshal([]byte(response(run)), &res))
	require.JSONEq(t, `{"greeting":"hello ada"}`, res.OKBody)
	require.Equal(t, result{OKBody: res.OKBody, FailFailed: true, CancelCancel: true}, res)
	require.Zero(t, cancelledAfter.Load(), "nothing after Cancel runs")

	// The children are runs of their own, invoked by the parent.
	ctx := context.Background()
	page, err := h.client.RunLogs(ctx, sdk.RunLogsRequest{URL: okURL})
	require.NoError(t, err)
	require.Len(t, page.Runs, 1)
	require.Equal(t, sdk.RunSuccess, page.Runs[0].State)
	require.NotNil(t, page.Runs[0].Invoker)
	require.Equal(t, run.RunID, page.Runs[0].Invoker.RunID)
	for url, state := range map[string]string{failURL: sdk.RunFailed, cancelURL: sdk.RunCanceled} {
		page, err := h.client.RunLogs(ctx, sdk.RunLogsRequest{URL: url})
		require.NoError(t, err)
		require.Len(t, page.Runs, 1)
		require.Equal(t, state, page.Runs[0].State, url)
	}
}

func TestServeWaitForEvent(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	type result struct {
		Data      string
		Timeout   bool
		Timeout2  bool
		Data2     string
		WaitedFor int64 // ms the timed-out wait took
	}
	url := h.Mount("/wait", func(c *sdk.Context) (any, error) {
		got, err := c.WaitForEvent("order-paid", "order-42-paid", time.Minute)
		if err != nil {
			return nil, err
		}
		start, err := sdk.Run(c, "start", func() (int64, error) { return time.Now().UnixMilli(), nil })
		if err != nil {
			return nil, err
		}
		none, err := c.WaitForEvent("never", "never-happens", time.Second)
		if err != nil {
			return nil, err
		}
		end, err := sdk.Run(c, "end", func() (int64, error) { return time.Now().UnixMilli(), nil })
		if err != nil {
			return nil, err
		}
		return result{string(got.Data), got.Timeout, none.Timeout, string(none.Data), end - start}, nil
	})
	runID, err := h.Trigger(sdk.TriggerRequest{URL: url})
	require.NoError(t, err)
	eventually(t, "the notify reaches the waiting run", func() bool {
		res, err := h.client.Notify(context.Background(), "order-42-paid", []byte(`{"amount":10}`))
		return err == nil && len(res) == 1 && res[0].Error == ""
	})
	run, err := h.Wait(runID)
	require.NoError(t, err)
	require.Equal(t, sdk.RunSuccess, run.State)
	var res result
	require.NoError(t, json.Unmarshal([]byte(response(run)), &res))
	require.Equal(t, `{"amount":10}`, res.Data)
	require.False(t, res.Timeout)
	require.True(t, res.Timeout2, "a wait nobody notifies times out")
	require.Empty(t, res.Data2)
	require.GreaterOrEqual(t, res.WaitedFor, int64(900), "the 1s timeout is not cut short")
}

func TestServeWebhook(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	hooks := make(chan sdk.Webhook, 1)
	type result struct {
		Method, Body, Header string
		Timeout              bool
	}
	url := h.Mount("/hook", func(c *sdk.Context) (any, error) {
		hook, err := c.CreateWebhook("hook")
		if err != nil {
			return nil, err
		}
		select {
		case hooks <- hook:
		default: // already handed over (replays)
		}
		call, timeout, err := c.WaitForWebhook("hooked", hook, time.Minute)
		if err != nil {
			return nil, err
		}
		return result{call.Method, string(call.Body), strings.Join(call.Header["X-Signature"], ","), timeout}, nil
	})
	runID, err := h.Trigger(sdk.TriggerRequest{URL: url})
	require.NoError(t, err)
	var hook sdk.Webhook
	select {
	case hook = <-hooks:
	case <-time.After(waitFor):
		t.Fatal("no webhook created")
	}
	require.True(t, strings.HasPrefix(hook.URL, h.srv.URL+"/"), hook.URL)
	req, err := http.NewRequest(http.MethodPost, hook.URL, strings.NewReader("payment done"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("X-Signature", "s1")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Less(t, resp.StatusCode, 300)

	run, err := h.Wait(runID)
	require.NoError(t, err)
	require.Equal(t, sdk.RunSuccess, run.State)
	var res result
	require.NoError(t, json.Unmarshal([]byte(response(run)), &res))
	require.Equal(t, result{Method: http.MethodPost, Body: "payment done", Header: "s1"}, res)
}

func TestServeCancel(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	var before, after atomic.Int32
	url := h.Mount("/cancel", func(c *sdk.Context) (any, error) {
		if _, err := sdk.Run(c, "before", func() (int, error) { before.Add(1); return 1, nil }); err != nil {
			return nil, err
		}
		if err := c.Cancel(); err != nil {
			return nil, err
		}
		if _, err := sdk.Run(c, "after", func() (int, error) { after.Add(1); return 2, nil }); err != nil {
			return nil, err
		}
		return "finished", nil
	})
	run := h.mustRun(t, sdk.TriggerRequest{URL: url})
	require.Equal(t, sdk.RunCanceled, run.State)
	require.Equal(t, int32(1), before.Load())
	require.Zero(t, after.Load(), "the step after Cancel never runs")
	require.Empty(t, response(run))
	for _, d := range h.Deliveries("/cancel") {
		require.Equal(t, http.StatusOK, d.Status, d.Body)
	}
}

func TestServeNonRetryable(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	var failures failureRecorder
	var attempts atomic.Int32
	url := h.Mount("/nonretryable", func(c *sdk.Context) (any, error) {
		if _, err := sdk.Run(c, "ok", func() (int, error) { return 1, nil }); err != nil {
			return nil, err
		}
		attempts.Add(1)
		return nil, sdk.NonRetryable(errors.New("invalid order"))
	}, sdk.WithFailureFunction(failures.fn))
	run := h.mustRun(t, sdk.TriggerRequest{URL: url, BodyJSON: map[string]int{"order": 7}}) // default retries: 3
	require.Equal(t, sdk.RunFailed, run.State)
	// The first delivery ran the step and went on to the error with the step's result
	// (inline answer): it answered the result, and the next delivery fails for good.
	require.Equal(t, int32(2), attempts.Load())
	final := 0
	for _, d := range h.Deliveries("/nonretryable") {
		if d.Status == 489 {
			final++
		}
	}
	require.Equal(t, 1, final, "a non-retryable error is not retried")

	eventually(t, "the failure function runs", func() bool { return len(failures.Calls()) == 1 })
	fc := failures.Calls()[0]
	require.Equal(t, run.RunID, fc.RunID)
	require.Equal(t, url, fc.URL)
	require.Equal(t, 489, fc.FailStatus)
	require.Equal(t, "invalid order", fc.FailResponse)
	require.JSONEq(t, `{"order":7}`, string(fc.Payload))

	var failed []delivery
	for _, d := range h.Deliveries("/nonretryable") {
		if d.Status != http.StatusOK {
			failed = append(failed, d)
		}
	}
	require.Len(t, failed, 1)
	require.Equal(t, 489, failed[0].Status)
	require.Contains(t, failed[0].Body, "WorkflowNonRetryableError")
	eventually(t, "the log shows the failure function's success", func() bool {
		run, err := h.Wait(run.RunID)
		return err == nil && run.FailureFunction != nil && run.FailureFunction.State == "CALLBACK_SUCCESS"
	})
	require.Len(t, failures.Calls(), 1, "the failure function runs once")
}

func TestServeRetries(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	var failures failureRecorder
	var mu sync.Mutex
	var retried []int
	url := h.Mount("/flaky", func(c *sdk.Context) (any, error) {
		mu.Lock()
		retried = append(retried, c.Retried)
		mu.Unlock()
		return nil, errors.New("flaky dependency")
	}, sdk.WithFailureFunction(failures.fn))
	one := 1
	run := h.mustRun(t, sdk.TriggerRequest{URL: url, Retries: &one, RetryDelay: "100"})
	require.Equal(t, sdk.RunFailed, run.State)
	eventually(t, "the failure function runs", func() bool { return len(failures.Calls()) == 1 })
	fc := failures.Calls()[0]
	require.Equal(t, http.StatusInternalServerError, fc.FailStatus)
	require.Equal(t, "flaky dependency", fc.FailResponse)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{0, 1}, retried, "one attempt and one retry")
}

func TestServeRetryAfter(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	var mu sync.Mutex
	var at []time.Time
	url := h.Mount("/later", func(c *sdk.Context) (any, error) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		if c.Retried == 0 {
			return nil, sdk.RetryAfter(time.Second, errors.New("rate limited"))
		}
		return "second time lucky", nil
	})
	// The normal backoff would be a minute: only Retry-After brings the retry this soon.
	run := h.mustRun(t, sdk.TriggerRequest{URL: url, RetryDelay: "60000"})
	require.Equal(t, sdk.RunSuccess, run.State)
	require.Equal(t, `"second time lucky"`, response(run))
	ds := h.Deliveries("/later")
	require.Len(t, ds, 2)
	require.Equal(t, http.StatusTooManyRequests, ds[0].Status)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, at, 2)
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 950*time.Millisecond, "the retry waits for Retry-After")
}

func TestServeNonDeterministic(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	routes := map[string]func(n int32, c *sdk.Context) error{
		// The step's name changes between deliveries.
		"name": func(n int32, c *sdk.Context) error {
			if _, err := sdk.Run(c, fmt.Sprintf("step-%d", n), func() (int, error) { return 1, nil }); err != nil {
				return err
			}
			_, err := sdk.Run(c, "after", func() (int, error) { return 2, nil }) // a second delivery
			return err
		},
		// The step's type changes between deliveries.
		"type": func(n int32, c *sdk.Context) error {
			if n == 1 {
				if _, err := sdk.Run(c, "step", func() (int, error) { return 1, nil }); err != nil {
					return err
				}
				_, err := sdk.Run(c, "after", func() (int, error) { return 2, nil })
				return err
			}
			return c.Sleep("step", time.Second)
		},
	}
	for name, step := range routes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := "/nondet-" + name
			var failures failureRecorder
			var deliveries atomic.Int32
			var stepErr atomic.Value
			url := h.Mount(path, func(c *sdk.Context) (any, error) {
				err := step(deliveries.Add(1), c)
				if err != nil {
					stepErr.Store(err)
				}
				return "done", err
			}, sdk.WithFailureFunction(failures.fn))
			zero := 0
			run := h.mustRun(t, sdk.TriggerRequest{URL: url, Retries: &zero})
			require.Equal(t, sdk.RunFailed, run.State)
			require.ErrorIs(t, stepErr.Load().(error), sdk.ErrNonDeterministic)

			ds := h.Deliveries(path)
			require.GreaterOrEqual(t, len(ds), 2)
			require.Equal(t, http.StatusOK, ds[0].Status, "%+v", ds)
			require.Equal(t, http.StatusInternalServerError, ds[1].Status)
			require.Contains(t, ds[1].Body, sdk.ErrNonDeterministic.Error(), "the 500 says why")
			eventually(t, "the failure function runs", func() bool { return len(failures.Calls()) == 1 })
			require.Contains(t, failures.Calls()[0].FailResponse, sdk.ErrNonDeterministic.Error())
		})
	}
}

func TestServeStepFlowControl(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	type observed struct {
		Key          string
		Parallelism  int
		RunKeyCount  int
		StepKeyCount int
	}
	type result struct {
		Before, After string
		Step          observed
	}
	var stepRuns atomic.Int32
	keyOf := func(fc *sdk.FlowControl) string {
		if fc == nil {
			return ""
		}
		return fc.Key
	}
	url := h.Mount("/fc", func(c *sdk.Context) (any, error) {
		before, err := sdk.Run(c, "before", func() (string, error) { return keyOf(c.FlowControl()), nil })
		if err != nil {
			return nil, err
		}
		obs, err := sdk.Run(c, "gated", func() (observed, error) {
			stepRuns.Add(1)
			o := observed{Key: keyOf(c.FlowControl())}
			if fc := c.FlowControl(); fc != nil {
				o.Parallelism = fc.Parallelism
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			// The delivery that found the step may still be answering (it published the
			// step's plan first): wait for the run's key to be free, then read both.
			for {
				runKey, err := h.client.FlowControlInfo(ctx, "runkey")
				if err != nil {
					return o, err
				}
				stepKey, err := h.client.FlowControlInfo(ctx, "stepkey")
				if err != nil {
					return o, err
				}
				o.RunKeyCount, o.StepKeyCount = runKey.ParallelismCount, stepKey.ParallelismCount
				if o.RunKeyCount == 0 || ctx.Err() != nil {
					return o, nil
				}
				time.Sleep(pollEvery)
			}
		}, sdk.WithStepFlowControl(sdk.FlowControl{Key: "stepkey", Parallelism: 1}))
		if err != nil {
			return nil, err
		}
		after, err := sdk.Run(c, "after", func() (string, error) { return keyOf(c.FlowControl()), nil })
		if err != nil {
			return nil, err
		}
		return result{before, after, obs}, nil
	})
	run := h.mustRun(t, sdk.TriggerRequest{URL: url, FlowControl: &sdk.FlowControl{Key: "runkey", Parallelism: 1}})
	require.Equal(t, sdk.RunSuccess, run.State)
	var res result
	require.NoError(t, json.Unmarshal([]byte(response(run)), &res))
	require.Equal(t, "runkey", res.Before, "other steps run under the run's key")
	require.Equal(t, "runkey", res.After)
	require.Equal(t, observed{Key: "stepkey", Parallelism: 1, RunKeyCount: 0, StepKeyCount: 1}, res.Step,
		"the step is admitted under its own key only")
	require.Equal(t, int32(1), stepRuns.Load())
}

// TestServeEveryStepKind runs one workflow through every kind of step but Cancel.
func TestServeEveryStepKind(t *testing.T) {
	t.Parallel()
	h := startHarness(t)
	third := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(bytes.ToUpper(body))
	}))
	t.Cleanup(third.Close)
	childURL := h.Mount("/child", func(c *sdk.Context) (any, error) {
		return sdk.Run(c, "square", func() (int, error) {
			var n int
			err := c.DecodePayload(&n)
			return n * n, err
		})
	})
	hooks := make(chan sdk.Webhook, 1)
	counts := map[string]*atomic.Int32{}
	for _, name := range []string{"run", "p1", "p2"} {
		counts[name] = new(atomic.Int32)
	}
	url := h.Mount("/all", func(c *sdk.Context) (any, error) {
		out := map[string]any{}
		n, err := sdk.Run(c, "run", func() (int, error) { counts["run"].Add(1); return 3, nil })
		if err != nil {
			return nil, err
		}
		out["run"] = n
		p1 := sdk.Go("p1", func() (int, error) { counts["p1"].Add(1); return n + 1, nil })
		p2 := sdk.Go("p2", func() (string, error) { counts["p2"].Add(1); return "two", nil })
		if err := c.Parallel(p1, p2); err != nil {
			return nil, err
		}
		out["parallel"] = fmt.Sprintf("%d %s", p1.Result(), p2.Result())
		if err := c.Sleep("sleep", time.Second); err != nil {
			return nil, err
		}
		until, err := sdk.Run(c, "until", func() (int64, error) { return time.Now().Add(time.Second).Unix(), nil })
		if err != nil {
			return nil, err
		}
		if err := c.SleepUntil("sleep-until", time.Unix(until, 0)); err != nil {
			return nil, err
		}
		call, err := c.Call("call", sdk.CallRequest{URL: third.URL, Body: []byte("shout")})
		if err != nil {
			return nil, err
		}
		out["call"] = fmt.Sprint(call.Status, " ", string(call.Body))
		inv, err := c.Invoke("invoke", sdk.InvokeRequest{URL: childURL, Body: []byte("4")})
		if err != nil {
			return nil, err
		}
		out["invoke"] = string(inv.Body)
		wait, err := c.WaitForEvent("wait", "every-step-event", time.Second)
		if err != nil {
			return nil, err
		}
		out["waitTimeout"] = wait.Timeout
		notified, err := c.Notify("notify", "nobody-waits", []byte("x"))
		if err != nil {
			return nil, err
		}
		out["notified"] = len(notified)
		hook, err := c.CreateWebhook("webhook")
		if err != nil {
			return nil, err
		}
		select {
		case hooks <- hook:
		default:
		}
		hc, timeout, err := c.WaitForWebhook("wait-webhook", hook, time.Minute)
		if err != nil {
			return nil, err
		}
		out["webhook"] = fmt.Sprint(string(hc.Body), " ", timeout)
		return out, nil
	})
	runID, err := h.Trigger(sdk.TriggerRequest{URL: url})
	require.NoError(t, err)
	select {
	case hook := <-hooks:
		resp, err := http.Post(hook.URL, "text/plain", strings.NewReader("hooked"))
		require.NoError(t, err)
		resp.Body.Close()
	case <-time.After(waitFor):
		t.Fatal("no webhook created")
	}
	run, err := h.Wait(runID)
	require.NoError(t, err)
	require.Equal(t, sdk.RunSuccess, run.State, "%+v", h.Deliveries("/all"))
	require.JSONEq(t, `{"run":3,"parallel":"4 two","call":"200 SHOUT","invoke":"16","waitTimeout":true,"notified":0,"webhook":"hooked false"}`, response(run))
	for name, n := range counts {
		require.Equal(t, int32(1), n.Load(), name)
	}
	types := map[string]bool{}
	for _, g := range run.Steps {
		for _, s := range g.Steps {
			types[s.StepType()] = true
		}
	}
	for _, want := range []string{"Run", "SleepFor", "SleepUntil", "Call", "Invoke", "Wait", "WaitForWebhook"} {
		require.True(t, types[want], "the log has a %s step: %v", want, types)
	}
}

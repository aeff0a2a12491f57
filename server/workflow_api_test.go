package server

// Real-HTTP tests of the workflow routes (docs/protocol.md, "Workflow runs"): every answer is
// validated against ../openapi.yaml by the harness of apitest_test.go.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/stretchr/testify/require"
)

const wfFeatureSet = "LazyFetch,InitialBody,WF_DetectTrigger,WF_TriggerOnConfig"

// newSDKEndpoint is a recording endpoint that answers like a workflow SDK: with
// Upstash-Workflow-Sdk-Version, without which WF_DetectTrigger fails a run's first delivery.
// Paths under /fail answer 500.
func newSDKEndpoint(t *testing.T) *recorder {
	t.Helper()
	sdk := http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}
	return &recorder{deliverytest.NewEndpoint(t, func(req *http.Request, _ int) (int, http.Header, string) {
		if strings.HasPrefix(req.URL.Path, "/fail") {
			return http.StatusInternalServerError, sdk, "boom"
		}
		return http.StatusOK, sdk, "ok"
	})}
}

// wfEntry is one /v2/batch entry with the workflow headers the SDK sends (lower-case).
func wfEntry(runID, wfURL string, init bool, body string, extra ...string) map[string]any {
	h := map[string]string{
		"upstash-workflow-init":                        fmt.Sprint(init),
		"upstash-workflow-runid":                       runID,
		"upstash-workflow-url":                         wfURL,
		"upstash-workflow-sdk-version":                 "1",
		"upstash-forward-upstash-workflow-sdk-version": "1",
		"upstash-feature-set":                          wfFeatureSet,
		"upstash-method":                               "POST",
		"content-type":                                 "application/json",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return map[string]any{"destination": wfURL, "headers": h, "body": body}
}

// batchWF publishes entries through /v2/batch and returns the answer.
func (e *apiEnv) batchWF(t *testing.T, entries ...map[string]any) apiResponse {
	t.Helper()
	raw, err := json.Marshal(entries)
	require.NoError(t, err)
	return e.call(t, http.MethodPost, "/v2/batch", raw, "Content-Type", "application/json")
}

// trigger starts run runID at wfURL with payload and returns its first message id.
func (e *apiEnv) trigger(t *testing.T, runID, wfURL, payload string, extra ...string) string {
	t.Helper()
	r := e.batchWF(t, wfEntry(runID, wfURL, true, payload, extra...))
	require.Equal(t, http.StatusCreated, r.Status, "trigger: %s", r.Body)
	res := decodeJSON[[]wire.PublishResult](t, r)
	require.Len(t, res, 1)
	require.False(t, res[0].Deduplicated)
	return res[0].MessageID
}

// step publishes a step of a live run and returns its message id.
func (e *apiEnv) step(t *testing.T, runID, wfURL, stepJSON string) string {
	t.Helper()
	r := e.batchWF(t, wfEntry(runID, wfURL, false, stepJSON))
	require.Equal(t, http.StatusCreated, r.Status, "step: %s", r.Body)
	return decodeJSON[[]wire.PublishResult](t, r)[0].MessageID
}

// hookEvent is a webhook call's event as raw JSON carries it: the body as base64 text.
type hookEvent struct {
	Method string              `json:"method"`
	Header map[string][]string `json:"header"`
	Body   string              `json:"body"`
	Proto  string              `json:"proto"`
	Host   string              `json:"host"`
	URL    string              `json:"url"`
}

// stepField decodes one field of a run log's step as a generic JSON value.
func stepField(t *testing.T, s wire.StepLog, key string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(s[key], &v), "step field %s", key)
	return v
}

// runLog returns the run log of runID.
func (e *apiEnv) runLog(t *testing.T, runID string) wire.RunLog {
	t.Helper()
	r := e.call(t, http.MethodGet, "/v2/workflows/logs?groupBy=workflowRunId&workflowRunId="+runID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	res := decodeJSON[wire.RunLogsPage](t, r)
	require.Len(t, res.Runs, 1, "%s", r.Body)
	return res.Runs[0]
}

// eventuallyRunState waits until runID is in state.
func (e *apiEnv) eventuallyRunState(t *testing.T, runID, state string) wire.RunLog {
	t.Helper()
	var v wire.RunLog
	eventually(t, runID+" "+state, func() bool {
		v = e.runLog(t, runID)
		return v.State == state
	})
	return v
}

// history decodes a delivery's history body.
func history(t *testing.T, q recorded) []wire.HistoryEntry {
	t.Helper()
	var h []wire.HistoryEntry
	require.NoError(t, json.Unmarshal(q.Body, &h), "delivery body %s", q.Body)
	return h
}

// stepObject decodes a history entry's step JSON.
func stepObject(t *testing.T, e wire.HistoryEntry) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Body, &m), "step %s", e.Body)
	return m
}

// deliveriesOfRun waits for n deliveries of runID and returns them in arrival order.
func deliveriesOfRun(t *testing.T, ep *recorder, runID string, n int) []recorded {
	t.Helper()
	return ep.waitN(t, n, func(q recorded) bool { return q.Header.Get("Upstash-Workflow-Runid") == runID })
}

// waitHeaders are the step publish headers of a wait request (canonical names).
func waitHeaders(runID, wfURL string) []string {
	return []string{
		"Content-Type", "application/json",
		"Upstash-Workflow-Runid", runID,
		"Upstash-Workflow-Url", wfURL,
		"Upstash-Workflow-Init", "false",
		"Upstash-Workflow-Calltype", "step",
		"Upstash-Forward-Upstash-Workflow-Sdk-Version", "1",
		"Upstash-Feature-Set", wfFeatureSet,
	}
}

func waitBody(wfURL, timeout, stepName string) []byte {
	return fmt.Appendf(nil, `{"url":%q,"timeout":%s,"step":{"stepId":1,"stepType":"Wait","stepName":%q,"concurrent":1}}`, wfURL, timeout, stepName)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestWorkflowAPIRun(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)
	const runID = "wfr_x"
	wfURL := ep.URL("/wf/seq?tenant=a")
	payload := `{"a":1}`

	m0 := env.trigger(t, runID, wfURL, payload)
	first := ep.waitMessage(t, m0)
	require.Equal(t, wfURL, first.URL)
	require.Equal(t, []wire.HistoryEntry{{MessageID: m0, Body: []byte(payload), CallType: "step"}}, history(t, first))
	require.JSONEq(t, fmt.Sprintf(`[{"messageId":%q,"body":%q,"callType":"step"}]`, m0, b64(payload)), string(first.Body))
	require.Equal(t, runID, first.Header.Get("Upstash-Workflow-Runid"))
	require.Equal(t, wfURL, first.Header.Get("Upstash-Workflow-Url"))
	require.Equal(t, "1", first.Header.Get("Upstash-Workflow-Sdk-Version"))
	require.NotEmpty(t, first.Header.Get("Upstash-Workflow-Createdat"))

	// A trigger with the id of a live run is deduplicated.
	r := env.batchWF(t, wfEntry(runID, wfURL, true, payload))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	require.True(t, decodeJSON[[]wire.PublishResult](t, r)[0].Deduplicated)

	// A step's delivery carries the history up to and including its own entry.
	step1 := `{"stepId":1,"stepName":"s1","stepType":"Run","out":"1","concurrent":1}`
	m1 := env.step(t, runID, wfURL, step1)
	d1 := ep.waitMessage(t, m1)
	h := history(t, d1)
	require.Len(t, h, 2)
	require.Equal(t, wire.HistoryEntry{MessageID: m0, Body: []byte(payload), CallType: "step"}, h[0])
	require.Equal(t, wire.HistoryEntry{MessageID: m1, Body: []byte(step1), CallType: "step"}, h[1])

	// Lazy fetch: the whole history of the live run.
	r = env.call(t, http.MethodGet, "/v2/workflows/runs/"+runID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, h, decodeJSON[[]wire.HistoryEntry](t, r))

	v := env.runLog(t, runID)
	require.Equal(t, "RUN_STARTED", v.State)
	require.Equal(t, wfURL, v.URL)
	require.Nil(t, v.Response)

	// Completion with the route's return value.
	r = env.call(t, http.MethodDelete, "/v2/workflows/runs/"+runID+"?cancel=false", []byte(`{"result":42}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Empty(t, r.Body)

	v = env.runLog(t, runID)
	require.Equal(t, "RUN_SUCCESS", v.State)
	require.NotNil(t, v.Response)
	require.Equal(t, `{"result":42}`, *v.Response)
	require.NotZero(t, v.CompletedAt)
	require.Len(t, v.Steps, 2)
	require.Equal(t, "sequential", v.Steps[0].Type)
	require.Equal(t, "Initial", stepField(t, v.Steps[0].Steps[0], "stepType"))
	require.Equal(t, payload, stepField(t, v.Steps[0].Steps[0], "out"))
	require.Equal(t, "s1", stepField(t, v.Steps[1].Steps[0], "stepName"))
	require.Equal(t, m1, stepField(t, v.Steps[1].Steps[0], "messageId"))
	require.Equal(t, "STEP_SUCCESS", stepField(t, v.Steps[1].Steps[0], "state"))

	// The SDK's name for the same list.
	r = env.call(t, http.MethodGet, "/v2/workflows/events?workflowRunId="+runID+"&state=RUN_SUCCESS", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Len(t, decodeJSON[wire.RunLogsPage](t, r).Runs, 1)

	// The run has ended: no history, no more steps; completing again is harmless.
	r = env.call(t, http.MethodGet, "/v2/workflows/runs/"+runID, nil)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	r = env.batchWF(t, wfEntry(runID, wfURL, false, `{"stepId":2,"stepName":"s2","stepType":"Run","out":"2","concurrent":1}`))
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "ended")
	r = env.call(t, http.MethodDelete, "/v2/workflows/runs/"+runID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "RUN_SUCCESS", env.runLog(t, runID).State)

	// Unknown runs.
	r = env.call(t, http.MethodDelete, "/v2/workflows/runs/wfr_unknown", nil)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodGet, "/v2/workflows/runs/wfr_unknown", nil)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	r = env.batchWF(t, wfEntry("wfr_unknown", wfURL, false, `{}`))
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)

	// A finished run's id can be reused.
	m2 := env.trigger(t, runID, wfURL, `"again"`)
	require.Equal(t, []wire.HistoryEntry{{MessageID: m2, Body: []byte(`"again"`), CallType: "step"}}, history(t, ep.waitMessage(t, m2)))
	require.Equal(t, "RUN_STARTED", env.runLog(t, runID).State)
}

func TestWorkflowAPIDetectTrigger(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	// The plain recorder does not answer Upstash-Workflow-Sdk-Version: with WF_DetectTrigger
	// the run fails at its first delivery.
	wfURL := env.Endpoint.URL("/not-a-workflow")
	env.trigger(t, "wfr_detect", wfURL, "p", "upstash-retries", "0")
	env.eventuallyRunState(t, "wfr_detect", "RUN_FAILED")
}

func TestWorkflowAPIEmptyPayload(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)
	wfURL := ep.URL("/wf/empty")
	raw, err := json.Marshal([]map[string]any{{"destination": wfURL, "headers": wfEntry("wfr_empty", wfURL, true, "")["headers"]}})
	require.NoError(t, err)
	r := env.call(t, http.MethodPost, "/v2/batch", raw, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	m0 := decodeJSON[[]wire.PublishResult](t, r)[0].MessageID
	first := ep.waitMessage(t, m0)
	// The initial entry of an empty payload must still be a base64 string ("").
	require.JSONEq(t, fmt.Sprintf(`[{"messageId":%q,"body":"","callType":"step"}]`, m0), string(first.Body))
	r = env.call(t, http.MethodGet, "/v2/workflows/runs/wfr_empty", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
}

func TestWorkflowAPIWaitNotify(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)

	t.Run("wait then notify", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_wait1"
		wfURL := ep.URL("/wf/wait1")
		m0 := env.trigger(t, runID, wfURL, "start")
		ep.waitMessage(t, m0)

		r := env.call(t, http.MethodPost, "/v2/wait/evt_1", waitBody(wfURL, `"1h"`, "w"), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Empty(t, r.Body)

		r = env.call(t, http.MethodGet, "/v2/waiters/evt_1", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		ws := decodeJSON[[]wire.Waiter](t, r)
		require.Len(t, ws, 1)
		require.Equal(t, wfURL, ws[0].URL)
		require.Equal(t, wfURL, ws[0].TimeoutURL)
		require.InDelta(t, time.Now().Add(time.Hour).Unix(), ws[0].Deadline, 60, "deadline in unix seconds")
		require.Equal(t, []string{"1"}, ws[0].Headers["Upstash-Workflow-Sdk-Version"])

		r = env.call(t, http.MethodPost, "/v2/notify/evt_1", []byte(`{"ok":true}`), "Content-Type", "application/json")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		res := decodeJSON[[]wire.NotifyResult](t, r)
		require.Len(t, res, 1)
		require.Equal(t, runID, res[0].RunID)
		require.NotEmpty(t, res[0].MessageID)
		require.Equal(t, wfURL, res[0].Waiter.URL)

		resumed := ep.waitMessage(t, res[0].MessageID)
		require.Equal(t, wfURL, resumed.URL)
		h := history(t, resumed)
		require.Len(t, h, 2)
		require.Equal(t, res[0].MessageID, h[1].MessageID)
		got := stepObject(t, h[1])
		require.Equal(t, "Wait", got["stepType"])
		require.Equal(t, "w", got["stepName"])
		require.Equal(t, b64(`{"ok":true}`), got["out"])
		require.Equal(t, false, got["waitTimeout"])

		r = env.call(t, http.MethodGet, "/v2/waiters/evt_1", nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Empty(t, decodeJSON[[]wire.Waiter](t, r))
		r = env.call(t, http.MethodPost, "/v2/notify/evt_1", []byte("late"), "Content-Type", "text/plain")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.JSONEq(t, `[]`, string(r.Body))
	})

	t.Run("numeric timeout and timeout url", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_wait_num"
		wfURL := ep.URL("/wf/waitnum")
		ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
		body := fmt.Appendf(nil, `{"url":%q,"timeout":90,"timeoutUrl":%q,"timeoutHeaders":{"Upstash-Workflow-RunId":[%q]},"step":{"stepId":1,"stepType":"Wait","stepName":"n","concurrent":1}}`,
			wfURL, ep.URL("/wf/timeout"), runID)
		r := env.call(t, http.MethodPost, "/v2/wait/evt_num", body, waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r = env.call(t, http.MethodGet, "/v2/waiters/evt_num", nil)
		ws := decodeJSON[[]wire.Waiter](t, r)
		require.Len(t, ws, 1)
		require.Equal(t, ep.URL("/wf/timeout"), ws[0].TimeoutURL)
		require.InDelta(t, time.Now().Add(90*time.Second).Unix(), ws[0].Deadline, 30)
	})

	t.Run("short timeout resumes with waitTimeout", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_wait_to"
		wfURL := ep.URL("/wf/waitto")
		ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
		r := env.call(t, http.MethodPost, "/v2/wait/evt_to", waitBody(wfURL, `"1s"`, "t"), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		d := deliveriesOfRun(t, ep, runID, 2)[1]
		h := history(t, d)
		require.Len(t, h, 2)
		got := stepObject(t, h[1])
		require.Equal(t, true, got["waitTimeout"])
		require.NotContains(t, got, "out")
	})

	t.Run("notify before wait (lookback)", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_wait2"
		wfURL := ep.URL("/wf/wait2")
		ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))

		r := env.call(t, http.MethodPost, "/v2/notify/"+runID+"/evt_2", []byte("early"), "Content-Type", "text/plain")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		res := decodeJSON[wire.NotifyResult](t, r)
		require.Equal(t, runID, res.RunID)
		require.Empty(t, res.MessageID)

		r = env.call(t, http.MethodPost, "/v2/wait/evt_2", waitBody(wfURL, `"1h"`, "w2"), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		d := deliveriesOfRun(t, ep, runID, 2)[1]
		h := history(t, d)
		require.Len(t, h, 2)
		got := stepObject(t, h[1])
		require.Equal(t, "w2", got["stepName"])
		require.Equal(t, b64("early"), got["out"])

		r = env.call(t, http.MethodGet, "/v2/waiters/evt_2", nil)
		require.Equal(t, http.StatusOK, r.Status)
		require.Empty(t, decodeJSON[[]wire.Waiter](t, r), "resolved at once, nobody waits")
	})

	t.Run("notify one waiting run", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_wait3"
		wfURL := ep.URL("/wf/wait3")
		ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
		r := env.call(t, http.MethodPost, "/v2/wait/evt_3", waitBody(wfURL, `"1h"`, "w3"), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		r = env.call(t, http.MethodPost, "/v2/notify/"+runID+"/evt_3", []byte("direct"), "Content-Type", "text/plain")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		res := decodeJSON[wire.NotifyResult](t, r)
		require.Equal(t, runID, res.RunID)
		require.NotEmpty(t, res.MessageID)
		h := history(t, ep.waitMessage(t, res.MessageID))
		require.Equal(t, b64("direct"), stepObject(t, h[len(h)-1])["out"])
	})

	t.Run("webhook resolves a wait", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_hook1"
		wfURL := ep.URL("/wf/hook1")
		ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
		hookURL, eventID := webhookOf(t, env, ep, runID, wfURL, "evt_hook1")
		r := env.call(t, http.MethodPost, "/v2/wait/"+eventID, waitForWebhookBody(wfURL, "hook", 2), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

		// Called by a third party: no token.
		req, err := http.NewRequest(http.MethodPost, hookURL+"?x=1", strings.NewReader("hook-body"))
		require.NoError(t, err)
		req.Header.Set("X-Sender", "stripe")
		req.Header.Set("Content-Type", "text/plain")
		r = env.send(t, req)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.JSONEq(t, `{"status":"received"}`, string(r.Body))

		d := deliveriesOfRun(t, ep, runID, 3)[2]
		h := history(t, d)
		got := stepObject(t, h[len(h)-1])
		require.Equal(t, "hook", got["stepName"])
		out, ok := got["out"].(string)
		require.True(t, ok, "out %v", got["out"])
		raw, err := base64.StdEncoding.DecodeString(out)
		require.NoError(t, err)
		var ev hookEvent
		require.NoError(t, json.Unmarshal(raw, &ev), "%s", raw)
		require.Equal(t, http.MethodPost, ev.Method)
		require.Equal(t, b64("hook-body"), ev.Body)
		require.Equal(t, strings.TrimPrefix(hookURL, env.URL)+"?x=1", ev.URL)
		require.Equal(t, []string{"stripe"}, ev.Header["X-Sender"])
		require.Equal(t, "http", ev.Proto)
	})

	t.Run("webhook before wait (lookback), any method", func(t *testing.T) {
		t.Parallel()
		const runID = "wfr_hook2"
		wfURL := ep.URL("/wf/hook2")
		ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
		hookURL, eventID := webhookOf(t, env, ep, runID, wfURL, "evt_hook2")
		req, err := http.NewRequest(http.MethodPut, hookURL, strings.NewReader("put-body"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "text/plain")
		r := env.send(t, req)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

		r = env.call(t, http.MethodPost, "/v2/wait/"+eventID, waitForWebhookBody(wfURL, "hook2", 2), waitHeaders(runID, wfURL)...)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		h := history(t, deliveriesOfRun(t, ep, runID, 3)[2])
		raw, err := base64.StdEncoding.DecodeString(stepObject(t, h[len(h)-1])["out"].(string))
		require.NoError(t, err)
		var ev hookEvent
		require.NoError(t, json.Unmarshal(raw, &ev))
		require.Equal(t, http.MethodPut, ev.Method)
		require.Equal(t, b64("put-body"), ev.Body)
	})

	t.Run("webhook errors", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{
			"/v2/workflows/hooks/no-such-user/wfr_x/evt_x",
			"/v2/workflows/hooks/" + testProject + "/wfr_no_such_run/evt_x",
		} {
			for _, method := range []string{http.MethodGet, http.MethodDelete, "PROPFIND", "REPORT"} {
				req, err := http.NewRequest(method, env.URL+path, nil)
				require.NoError(t, err)
				r := env.send(t, req)
				require.Equal(t, http.StatusNotFound, r.Status, "%s %s: %s", method, path, r.Body)
			}
		}
	})
}

func TestWorkflowAPIBulkCancel(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)
	// Delayed first deliveries: the runs stay live and untouched.
	delay := []string{"upstash-delay", "1h"}
	env.trigger(t, "wfr_c1", ep.URL("/bulk/a"), "1", delay...)
	env.trigger(t, "wfr_c2", ep.URL("/bulk/b"), "2", delay...)
	env.trigger(t, "wfr_c3", ep.URL("/other"), "3", append(delay, "upstash-label", "keep")...)
	env.trigger(t, "wfr_c4", ep.URL("/other2"), "4", delay...)

	cancel := func(query string) int {
		t.Helper()
		r := env.call(t, http.MethodDelete, "/v2/workflows/runs?"+query, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return decodeJSON[wire.CancelResult](t, r).Cancelled
	}
	require.Equal(t, 1, cancel("workflowRunIds=wfr_c1&workflowRunIds=wfr_unknown"))
	require.Equal(t, 0, cancel("workflowRunIds=wfr_c1"), "already cancelled")
	require.Equal(t, 1, cancel("workflowUrl="+url.QueryEscape(ep.URL("/bulk/"))))
	require.Equal(t, 0, cancel("workflowUrl="+url.QueryEscape(ep.URL("/oth"))+"&workflowUrlExactMatch=true"))
	require.Equal(t, 1, cancel("label=keep&count=5&fromDate=1&toDate="+fmt.Sprint(time.Now().Add(time.Minute).UnixMilli())))

	for id, state := range map[string]string{"wfr_c1": "RUN_CANCELED", "wfr_c2": "RUN_CANCELED", "wfr_c3": "RUN_CANCELED", "wfr_c4": "RUN_STARTED"} {
		require.Equal(t, state, env.runLog(t, id).State, id)
	}
	r := env.call(t, http.MethodGet, "/v2/workflows/logs?state=RUN_CANCELED&count=2", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	page := decodeJSON[wire.RunLogsPage](t, r)
	require.Len(t, page.Runs, 2)
	require.NotEmpty(t, page.Cursor)
	r = env.call(t, http.MethodGet, "/v2/workflows/logs?state=RUN_CANCELED&count=2&cursor="+page.Cursor, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Len(t, decodeJSON[wire.RunLogsPage](t, r).Runs, 1)

	// context.cancel() of the last one.
	r = env.call(t, http.MethodDelete, "/v2/workflows/runs/wfr_c4?cancel=true", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, "RUN_CANCELED", env.runLog(t, "wfr_c4").State)
	require.Equal(t, 0, cancel("all=true"), "no live run left")
	require.Empty(t, ep.all(), "cancelled runs deliver nothing")
}

func TestWorkflowAPITrigger(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)
	// The spec router matches {destination} within one segment: send it percent-encoded
	// (the server decodes a destination without "://" once).
	trigger := func(dest string, body []byte, header ...string) apiResponse {
		return env.call(t, http.MethodPost, "/v2/trigger/"+url.PathEscape(dest), body, header...)
	}
	wfURL := ep.URL("/wf/trigger")
	// A live run's id is refused (this run waits an hour for its first delivery).
	r := trigger(wfURL, nil, "Upstash-Workflow-RunId", "wfr_t0", "Upstash-Delay", "1h")
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	r = trigger(wfURL, nil, "Upstash-Workflow-RunId", "wfr_t0")
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "already exists")

	r = trigger(wfURL, []byte("payload"), "Upstash-Workflow-RunId", "wfr_t1")
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	res := decodeJSON[triggerResponse](t, r)
	require.Equal(t, "wfr_t1", res.WorkflowRunID)
	d := ep.waitMessage(t, res.MessageID)
	require.Equal(t, wfURL, d.URL)
	require.Equal(t, "true", d.Header.Get("Upstash-Workflow-Unknown-Sdk"))
	require.Equal(t, "wfr_t1", d.Header.Get("Upstash-Workflow-Runid"))
	require.Equal(t, []wire.HistoryEntry{{MessageID: res.MessageID, Body: []byte("payload"), CallType: "step"}}, history(t, d))
	// This endpoint answers without adopting the run (no SDK re-trigger): the run fails.
	require.Equal(t, "RUN_FAILED", env.eventuallyRunState(t, "wfr_t1", "RUN_FAILED").State)

	r = trigger(wfURL, []byte("x"))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	require.True(t, strings.HasPrefix(decodeJSON[triggerResponse](t, r).WorkflowRunID, "wfr_"))

	r = trigger(wfURL, nil, "Upstash-Workflow-RunId", "bad id/!")
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	r = trigger("ftp://x/y", nil)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
}

// TestWorkflowAPITriggerAdoptedBySDK: the SDK's answer to a REST-triggered run's first
// delivery (its init re-published with upstash-workflow-trigger-by-sdk) is the run's next
// delivery, of the recorded history, with the route's failure callback; a second such
// answer (a redelivery) is a duplicate, as is one for a run triggered by an SDK.
func TestWorkflowAPITriggerAdoptedBySDK(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	// The endpoint answers the first delivery only once the test has adopted the run, as
	// the SDK re-publishes the init before it answers; and the adopted one once the test
	// has read it (a delivered message is gone).
	adopted, checked := make(chan struct{}), make(chan struct{})
	hold := func(c chan struct{}) {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
		}
	}
	ep := &recorder{deliverytest.NewEndpoint(t, func(req *http.Request, _ int) (int, http.Header, string) {
		if req.Header.Get("Upstash-Workflow-Unknown-Sdk") != "" {
			hold(adopted)
		} else if req.Header.Get("Upstash-Workflow-Runid") == "wfr_adopt" {
			hold(checked)
		}
		return http.StatusOK, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, "ok"
	})}
	wfURL := ep.URL("/wf/adopt")
	r := env.call(t, http.MethodPost, "/v2/trigger/"+url.PathEscape(wfURL), []byte(`{"n":1}`),
		"Upstash-Workflow-RunId", "wfr_adopt", "Upstash-Retries", "1")
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	first := decodeJSON[triggerResponse](t, r)

	adopt := wfEntry("wfr_adopt", wfURL, true, `{"n":1}`, "upstash-workflow-trigger-by-sdk", "true",
		"upstash-failure-callback", wfURL)
	r = env.batchWF(t, adopt)
	close(adopted)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	res := decodeJSON[[]wire.PublishResult](t, r)
	require.False(t, res[0].Deduplicated, "the SDK's answer continues the run")
	m := decodeJSON[wire.Message](t, env.call(t, http.MethodGet, "/v2/messages/"+res[0].MessageID, nil))
	close(checked)
	require.Equal(t, 1, m.MaxRetries, "the trigger's own settings stay")
	require.Equal(t, wfURL, m.FailureCallback, "the route's failure callback is taken")
	require.Equal(t, "true", ep.waitMessage(t, first.MessageID).Header.Get("Upstash-Workflow-Unknown-Sdk"))
	d := ep.waitMessage(t, res[0].MessageID)
	require.Empty(t, d.Header.Get("Upstash-Workflow-Unknown-Sdk"))
	require.Equal(t, "1", d.Header.Get("Upstash-Workflow-Sdk-Version"))
	require.Equal(t, []wire.HistoryEntry{{MessageID: first.MessageID, Body: []byte(`{"n":1}`), CallType: "step"}}, history(t, d),
		"the adopted delivery carries the history the trigger recorded, once")

	r = env.batchWF(t, adopt)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	require.True(t, decodeJSON[[]wire.PublishResult](t, r)[0].Deduplicated, "a second answer is a duplicate")

	env.trigger(t, "wfr_bysdk", wfURL, `{}`)
	r = env.batchWF(t, wfEntry("wfr_bysdk", wfURL, true, `{}`, "upstash-workflow-trigger-by-sdk", "true"))
	require.True(t, decodeJSON[[]wire.PublishResult](t, r)[0].Deduplicated, "only a REST-triggered run is adopted")
}

func TestWorkflowAPIDLQ(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	const runID = "wfr_dlq"
	wfURL := env.Endpoint.URL("/fail/wf")
	// No WF_DetectTrigger needed: the endpoint answers 500 and there is no retry.
	env.trigger(t, runID, wfURL, "p", "upstash-retries", "0", "upstash-feature-set", "LazyFetch")

	list := func(path string) []wire.WorkflowDLQMessage {
		t.Helper()
		r := env.call(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return decodeJSON[wire.WorkflowDLQPage](t, r).Messages
	}
	var entries []wire.WorkflowDLQMessage
	eventually(t, "workflow dead letter", func() bool {
		entries = list("/v2/workflows/dlq?workflowRunId=" + runID)
		return len(entries) == 1
	})
	dl := entries[0]
	require.Equal(t, runID, dl.RunID)
	require.Equal(t, wfURL, dl.WorkflowURL)
	require.NotZero(t, dl.WorkflowCreatedAt)
	require.Equal(t, 500, dl.ResponseStatus)
	v := env.eventuallyRunState(t, runID, "RUN_FAILED")
	require.Equal(t, dl.DLQID, v.DLQID)

	require.Len(t, list("/v2/dlq?source=workflow&workflowRunId="+runID), 1)
	require.Len(t, list("/v2/workflows/dlq?state=RUN_FAILED&responseStatus=500"), 1)
	require.Empty(t, list("/v2/workflows/dlq?state=RUN_SUCCESS"))
	r := env.call(t, http.MethodGet, "/v2/dlq", nil) // the plain view admits it too
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Len(t, decodeJSON[wire.DLQPage](t, r).Messages, 1)

	r = env.call(t, http.MethodGet, "/v2/workflows/dlq/"+dl.DLQID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, dl.DLQID, decodeJSON[wire.WorkflowDLQMessage](t, r).DLQID)

	// Resume: the run is live again and fails again into a new dead letter.
	r = env.call(t, http.MethodPost, "/v2/workflows/dlq/resume/"+dl.DLQID, nil, "Upstash-Retries", "0")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	resumed := decodeJSON[wire.ResumeResult](t, r)
	require.Len(t, resumed.Runs, 1)
	require.Equal(t, runID, resumed.Runs[0].RunID)
	require.Equal(t, dl.WorkflowCreatedAt, resumed.Runs[0].CreatedAt)
	eventually(t, "second dead letter", func() bool {
		entries = list("/v2/workflows/dlq?workflowRunId=" + runID)
		return len(entries) == 1 && entries[0].DLQID != dl.DLQID
	})
	env.eventuallyRunState(t, runID, "RUN_FAILED")

	// Resuming a dead letter that is gone resumes nothing.
	r = env.call(t, http.MethodPost, "/v2/workflows/dlq/restart/"+dl.DLQID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Empty(t, decodeJSON[wire.ResumeResult](t, r).Runs)

	// Restart by filter.
	dl = entries[0]
	r = env.call(t, http.MethodPost, "/v2/workflows/dlq/restart?dlqIds="+dl.DLQID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Len(t, decodeJSON[wire.ResumeResult](t, r).Runs, 1)
	eventually(t, "third dead letter", func() bool {
		entries = list("/v2/workflows/dlq?workflowRunId=" + runID)
		return len(entries) == 1 && entries[0].DLQID != dl.DLQID
	})
	env.eventuallyRunState(t, runID, "RUN_FAILED")
	dl = entries[0]
	r = env.call(t, http.MethodPost, "/v2/workflows/dlq/resume?all=true", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Len(t, decodeJSON[wire.ResumeResult](t, r).Runs, 1)
	eventually(t, "fourth dead letter", func() bool {
		entries = list("/v2/workflows/dlq?workflowRunId=" + runID)
		return len(entries) == 1 && entries[0].DLQID != dl.DLQID
	})
	env.eventuallyRunState(t, runID, "RUN_FAILED")
	dl = entries[0]

	// No failure callback was configured.
	r = env.call(t, http.MethodPost, "/v2/workflows/dlq/callback/"+dl.DLQID, nil)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodPost, "/v2/workflows/dlq/resume", nil, "Upstash-Retries", "-1")
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)

	r = env.call(t, http.MethodDelete, "/v2/workflows/dlq/"+dl.DLQID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Empty(t, r.Body)
	r = env.call(t, http.MethodGet, "/v2/workflows/dlq/"+dl.DLQID, nil)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodDelete, "/v2/workflows/dlq/"+dl.DLQID, nil)
	require.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	r = env.call(t, http.MethodDelete, "/v2/workflows/dlq?workflowRunId="+runID, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Zero(t, decodeJSON[wire.DeleteResult](t, r).Deleted)
}

func TestWorkflowAPIBadInput(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	ep := newSDKEndpoint(t)
	const runID = "wfr_bad"
	wfURL := ep.URL("/wf/bad")
	ep.waitMessage(t, env.trigger(t, runID, wfURL, "start"))
	const endedID = "wfr_bad_ended"
	ep.waitMessage(t, env.trigger(t, endedID, wfURL, "start"))
	require.Equal(t, http.StatusOK, env.call(t, http.MethodDelete, "/v2/workflows/runs/"+endedID+"?cancel=true", nil).Status)

	step := `{"stepId":1,"stepType":"Wait","stepName":"w","concurrent":1}`
	for _, tc := range []struct {
		name, method, path string
		body               string
		header             []string
		status             int
		errPart            string
	}{
		{name: "batch run id characters", method: http.MethodPost, path: "/v2/batch",
			body: mustJSON(t, []any{wfEntry("wfr bad/id", wfURL, true, "x")}), header: []string{"Content-Type", "application/json"}, status: 400, errPart: "workflow run id"},
		{name: "batch run id too long", method: http.MethodPost, path: "/v2/batch",
			body: mustJSON(t, []any{wfEntry("wfr_"+strings.Repeat("a", 300), wfURL, true, "x")}), header: []string{"Content-Type", "application/json"}, status: 400, errPart: "at most 256"},
		{name: "batch call type", method: http.MethodPost, path: "/v2/batch",
			body: mustJSON(t, []any{wfEntry(runID, wfURL, false, "x", "upstash-workflow-calltype", "failureCall")}), header: []string{"Content-Type", "application/json"}, status: 400, errPart: "Upstash-Workflow-Calltype"},
		{name: "batch workflow url", method: http.MethodPost, path: "/v2/batch",
			body: mustJSON(t, []any{wfEntry("wfr_new", "ftp://x/y", true, "x")}), header: []string{"Content-Type", "application/json"}, status: 400},
		{name: "wait without step", method: http.MethodPost, path: "/v2/wait/evt",
			body: fmt.Sprintf(`{"url":%q,"timeout":"1h"}`, wfURL), header: waitHeaders(runID, wfURL), status: 400, errPart: "step"},
		{name: "wait body not JSON", method: http.MethodPost, path: "/v2/wait/evt",
			body: "nope", header: waitHeaders(runID, wfURL), status: 400, errPart: "wait body"},
		{name: "wait bad timeout", method: http.MethodPost, path: "/v2/wait/evt",
			body: string(waitBody(wfURL, `"soon"`, "w")), header: waitHeaders(runID, wfURL), status: 400, errPart: "timeout"},
		{name: "wait zero timeout", method: http.MethodPost, path: "/v2/wait/evt",
			body: string(waitBody(wfURL, `0`, "w")), header: waitHeaders(runID, wfURL), status: 400, errPart: "timeout"},
		{name: "wait timeout object", method: http.MethodPost, path: "/v2/wait/evt",
			body: string(waitBody(wfURL, `{}`, "w")), header: waitHeaders(runID, wfURL), status: 400, errPart: "timeout"},
		{name: "wait timeout beyond the limit", method: http.MethodPost, path: "/v2/wait/evt",
			body: string(waitBody(wfURL, `"9000h"`, "w")), header: waitHeaders(runID, wfURL), status: 412, errPart: "wait timeout"},
		{name: "wait without run id", method: http.MethodPost, path: "/v2/wait/evt",
			body: string(waitBody(wfURL, `"1h"`, "w")), header: []string{"Content-Type", "application/json"}, status: 400, errPart: "workflow run id"},
		{name: "wait bad run id", method: http.MethodPost, path: "/v2/wait/evt",
			body: string(waitBody(wfURL, `"1h"`, "w")), header: waitHeaders("wfr bad!", wfURL), status: 400, errPart: "workflow run id"},
		{name: "wait unknown run", method: http.MethodPost, path: "/v2/wait/evt",
			body: string(waitBody(wfURL, `"1h"`, "w")), header: waitHeaders("wfr_nope", wfURL), status: 400, errPart: "not found"},
		{name: "wait ended run", method: http.MethodPost, path: "/v2/wait/evt",
			body: string(waitBody(wfURL, `"1h"`, "w")), header: waitHeaders(endedID, wfURL), status: 400, errPart: "RUN_CANCELED"},
		{name: "wait bad url", method: http.MethodPost, path: "/v2/wait/evt",
			body: `{"url":"ftp://x","step":` + step + `}`, header: waitHeaders(runID, wfURL), status: 400},
		{name: "notify unknown run", method: http.MethodPost, path: "/v2/notify/wfr_nope/evt", body: "x", status: 404, errPart: "not found"},
		{name: "cancel runs bad count", method: http.MethodDelete, path: "/v2/workflows/runs?count=0", status: 400, errPart: "count"},
		{name: "cancel runs bad state", method: http.MethodDelete, path: "/v2/workflows/runs?state=DONE", status: 400, errPart: "state"},
		{name: "cancel runs bad date", method: http.MethodDelete, path: "/v2/workflows/runs?fromDate=yesterday", status: 400, errPart: "fromDate"},
		{name: "logs bad cursor", method: http.MethodGet, path: "/v2/workflows/logs?cursor=nope", status: 400, errPart: "cursor"},
		{name: "logs bad count", method: http.MethodGet, path: "/v2/workflows/events?count=-1", status: 400, errPart: "count"},
		{name: "logs bad state", method: http.MethodGet, path: "/v2/workflows/logs?state=FAILED", status: 400, errPart: "state"},
		{name: "workflow dlq bad cursor", method: http.MethodGet, path: "/v2/workflows/dlq?cursor=nope", status: 400, errPart: "cursor"},
		{name: "dlq source workflow bad state", method: http.MethodGet, path: "/v2/dlq?source=workflow&state=x", status: 400, errPart: "state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			r := env.call(t, tc.method, tc.path, body, tc.header...)
			require.Equal(t, tc.status, r.Status, "%s", r.Body)
			require.Contains(t, r.errorMessage(t), tc.errPart)
		})
	}

	// Nothing of the above touched the live run.
	v := env.runLog(t, runID)
	require.Equal(t, "RUN_STARTED", v.State)
	require.Len(t, v.Steps, 1)
	r := env.call(t, http.MethodGet, "/v2/waiters/evt", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Empty(t, decodeJSON[[]wire.Waiter](t, r))

	// A body beyond the limit.
	r = env.call(t, http.MethodPost, "/v2/notify/evt", make([]byte, 2<<20))
	require.Equal(t, http.StatusRequestEntityTooLarge, r.Status, "%s", r.Body)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}

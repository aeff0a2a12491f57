package delivery

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk/wire"
)

// historyOf decodes a workflow delivery's body: the history prefix of docs/protocol.md,
// "Workflow runs".
func historyOf(t *testing.T, body []byte) []map[string]string {
	t.Helper()
	var h []map[string]string
	require.NoError(t, json.Unmarshal(body, &h), "body %s", body)
	return h
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// sdkEndpoint answers like the workflow SDK: with the protocol header.
func sdkEndpoint(t *testing.T) *endpoint {
	return newEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		return http.StatusOK, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, `{"finishCondition":"success"}`
	})
}

func (b *testBundle) trigger(t *testing.T, url, runID, payload string, m *Message) {
	t.Helper()
	if m == nil {
		m = &Message{}
	}
	m.Project, m.URL, m.Method, m.Body, m.RunID = testProject, url, "POST", []byte(payload), runID
	if m.Header == nil {
		m.Header = map[string][]string{"Upstash-Workflow-Sdk-Version": {"1"}, "X-User": {"u"}}
	}
	res, err := b.engine.PublishAll(t.Context(), []Publication{{Message: m, Init: &RunInit{DetectTrigger: true}}})
	require.NoError(t, err)
	require.False(t, res[0].Deduplicated)
}

func (b *testBundle) step(t *testing.T, url, runID, body string) PublishResult {
	t.Helper()
	res, err := b.engine.PublishAll(t.Context(), []Publication{{Message: &Message{
		Project: testProject, URL: url, Method: "POST", Body: []byte(body), RunID: runID, CallType: CallStep,
		Header: map[string][]string{"Upstash-Workflow-Sdk-Version": {"1"}},
	}}})
	require.NoError(t, err)
	return res[0]
}

func TestWorkflowHistoryPrefixAndRunConfig(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := sdkEndpoint(t)
	url := ep.url("/wf")
	b.trigger(t, url, "wfr_a", `{"n":1}`, &Message{Retries: 1, Labels: []string{"l1"}})

	first := ep.waitRequests(t, "/wf", 1)[0]
	h := historyOf(t, first.Body)
	require.Len(t, h, 1)
	require.Equal(t, b64(`{"n":1}`), h[0]["body"])
	require.Equal(t, "wfr_a", first.Header.Get("Upstash-Workflow-Runid"))
	require.Equal(t, "l1", first.Header.Get("Upstash-Label"))
	require.Equal(t, "u", first.Header.Get("X-User"))
	require.NotEmpty(t, first.Header.Get("Upstash-Workflow-Createdat"))

	// Two steps published before either is delivered: each delivery ends with its own entry.
	b.step(t, url, "wfr_a", `{"stepId":1,"stepName":"s1","stepType":"Run","out":"1","concurrent":1}`)
	require.True(t, b.step(t, url, "wfr_a", `{"stepId":1,"stepName":"s1","stepType":"Run","out":"again","concurrent":1}`).Deduplicated,
		"a step already recorded is not recorded again")
	b.step(t, url, "wfr_a", `{"stepId":2,"stepName":"s2","stepType":"Run","out":"2","concurrent":1}`)
	got := ep.waitRequests(t, "/wf", 3)
	lens := map[int]bool{}
	for _, r := range got[1:] {
		h := historyOf(t, r.Body)
		lens[len(h)] = true
		require.Equal(t, "u", r.Header.Get("X-User"), "the trigger's user headers reach every delivery")
		require.Equal(t, "l1", r.Header.Get("Upstash-Label"))
	}
	require.Equal(t, map[int]bool{2: true, 3: true}, lens)

	require.NoError(t, b.engine.CompleteRun(t.Context(), testProject, "wfr_a", []byte(`"done"`), true))
	run, err := b.engine.Run(t.Context(), testProject, "wfr_a")
	require.NoError(t, err)
	require.Equal(t, RunSuccess, run.State)
	require.Equal(t, 1, run.Retries)
	require.Len(t, run.History, 3)
	_, err = b.engine.PublishAll(t.Context(), []Publication{{Message: &Message{Project: testProject, URL: url, Method: "POST", RunID: "wfr_a", CallType: CallStep, Body: []byte(`{"stepId":3}`)}}})
	require.ErrorIs(t, err, ErrRunEnded)
}

func TestWorkflowDuplicateTriggerIsDeduplicated(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := sdkEndpoint(t)
	b.trigger(t, ep.url("/wf"), "wfr_dup", `1`, nil)
	res, err := b.engine.PublishAll(t.Context(), []Publication{{Message: &Message{Project: testProject, URL: ep.url("/wf"), Method: "POST", RunID: "wfr_dup"}, Init: &RunInit{}}})
	require.NoError(t, err)
	require.True(t, res[0].Deduplicated)
}

func TestWorkflowNonWorkflowDestinationFailsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := newEndpoint(t, nil) // answers 200 without the protocol header
	b.trigger(t, ep.url("/plain"), "wfr_plain", `{}`, nil)
	deliverytest.Eventually(t, waitTimeout, "run wfr_plain failed", func() bool {
		run, err := b.engine.Run(t.Context(), testProject, "wfr_plain")
		return err == nil && run.State == RunFailed
	})
	entries, _, err := b.engine.DLQ(t.Context(), testProject, "", 10, func(*DLQEntry) bool { return true })
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Contains(t, entries[0].Response.Error, "non-workflow destination")
}

func TestWorkflowFailureCallbackCarriesRunAndInitialPayload(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := newEndpoint(t, func(r *http.Request, n int) (int, http.Header, string) {
		if r.URL.Path == "/wf" {
			return http.StatusInternalServerError, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, `{"message":"boom"}`
		}
		return http.StatusOK, nil, `{"result":"ok"}`
	})
	b.trigger(t, ep.url("/wf"), "wfr_f", `{"initial":true}`, &Message{Retries: 0,
		FailureCallback: &CallbackSpec{URL: ep.url("/failure"), Method: "POST", RunID: "wfr_f", CallType: CallFailure,
			Header: map[string][]string{"Upstash-Workflow-Is-Failure": {"true"}}}})
	fc := ep.waitRequests(t, "/failure", 1)[0]
	var body wire.CallbackPayload
	require.NoError(t, json.Unmarshal(fc.Body, &body))
	require.Equal(t, "wfr_f", body.WorkflowRunID)
	require.NotZero(t, body.WorkflowCreatedAt)
	require.Equal(t, b64(`{"initial":true}`), body.SourceBody, "sourceBody is the run's initial payload")
	require.Equal(t, 500, body.Status)
	require.Equal(t, "wfr_f", fc.Header.Get("Upstash-Workflow-Runid"))
	require.Equal(t, "true", fc.Header.Get("Upstash-Workflow-Is-Failure"))
	deliverytest.Eventually(t, waitTimeout, "run wfr_f failed with its failure function done", func() bool {
		run, err := b.engine.Run(t.Context(), testProject, "wfr_f")
		return err == nil && run.State == RunFailed && run.FailureState == callbackSuccess
	})
}

func TestWorkflowWaitNotifyTimeoutAndLookback(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := sdkEndpoint(t)
	url := ep.url("/wf")
	b.trigger(t, url, "wfr_w", `{}`, nil)
	ep.waitRequests(t, "/wf", 1)
	resume := &Message{Project: testProject, URL: url, Method: "POST", RunID: "wfr_w", Header: map[string][]string{"Upstash-Workflow-Sdk-Version": {"1"}}}
	wait := func(event string, timeout time.Duration) {
		require.NoError(t, b.engine.Wait(t.Context(), WaitRequest{Project: testProject, EventID: event, RunID: "wfr_w", Timeout: timeout, TimeoutText: "t",
			Step: []byte(`{"stepId":1,"stepName":"w","stepType":"Wait","concurrent":1}`), Resume: resume, OnTimeout: resume}))
	}

	wait("evt", time.Hour)
	ws, err := b.engine.Waiters(t.Context(), testProject, "evt")
	require.NoError(t, err)
	require.Len(t, ws, 1)
	res, _, err := b.engine.Notify(t.Context(), testProject, "evt", "", []byte(`{"hello":1}`))
	require.NoError(t, err)
	require.Len(t, res, 1)
	got := ep.waitRequests(t, "/wf", 2)[1]
	h := historyOf(t, got.Body)
	var step map[string]any
	raw, _ := base64.StdEncoding.DecodeString(h[len(h)-1]["body"])
	require.NoError(t, json.Unmarshal(raw, &step))
	require.Equal(t, b64(`{"hello":1}`), step["out"])
	require.Equal(t, false, step["waitTimeout"])
	ws, _ = b.engine.Waiters(t.Context(), testProject, "evt")
	require.Empty(t, ws)

	// A timeout resumes the run with waitTimeout and no out.
	resume2 := *resume
	wait2 := WaitRequest{Project: testProject, EventID: "late", RunID: "wfr_w", Timeout: 50 * time.Millisecond, TimeoutText: "50ms",
		Step: []byte(`{"stepId":2,"stepName":"w2","stepType":"Wait","concurrent":1}`), Resume: &resume2, OnTimeout: &resume2}
	require.NoError(t, b.engine.Wait(t.Context(), wait2))
	got = ep.waitRequests(t, "/wf", 3)[2]
	h = historyOf(t, got.Body)
	raw, _ = base64.StdEncoding.DecodeString(h[len(h)-1]["body"])
	step = map[string]any{}
	require.NoError(t, json.Unmarshal(raw, &step))
	require.Equal(t, true, step["waitTimeout"])
	require.NotContains(t, step, "out")

	// Lookback: the event arrives before the wait; the wait resolves at once.
	res, _, err = b.engine.Notify(t.Context(), testProject, "early", "wfr_w", []byte("x"))
	require.NoError(t, err)
	require.Empty(t, res)
	require.NoError(t, b.engine.Wait(t.Context(), WaitRequest{Project: testProject, EventID: "early", RunID: "wfr_w", Timeout: time.Hour,
		Step: []byte(`{"stepId":3,"stepName":"w3","stepType":"Wait","concurrent":1}`), Resume: resume, OnTimeout: resume}))
	ep.waitRequests(t, "/wf", 4)
	ws, _ = b.engine.Waiters(t.Context(), testProject, "early")
	require.Empty(t, ws)
}

func TestWorkflowCancelDropsPendingWork(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ep := sdkEndpoint(t)
	url := ep.url("/wf")
	b.trigger(t, url, "wfr_c", `{}`, nil)
	ep.waitRequests(t, "/wf", 1)
	_, err := b.engine.PublishAll(t.Context(), []Publication{{Message: &Message{Project: testProject, URL: url, Method: "POST", RunID: "wfr_c", CallType: CallStep,
		Body: []byte(`{"stepId":1,"stepType":"SleepFor","sleepFor":3600}`), NotBefore: time.Now().Add(time.Hour).UnixMilli()}}})
	require.NoError(t, err)
	live, err := b.engine.CancelRun(t.Context(), testProject, "wfr_c")
	require.NoError(t, err)
	require.True(t, live)
	n, err := b.engine.Cancel(t.Context(), testProject, nil, func(m *Message) bool { return m.RunID == "wfr_c" }, 100)
	require.NoError(t, err)
	require.Zero(t, n, "cancelling the run removed its pending messages")
	live, err = b.engine.CancelRun(t.Context(), testProject, "wfr_c")
	require.NoError(t, err)
	require.False(t, live)
}

func TestWorkflowLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxRunSteps: 3, MaxParallelSteps: 2, MaxInvokeDepth: 2})
	ep := sdkEndpoint(t)
	url := ep.url("/wf")
	b.trigger(t, url, "wfr_l", `{}`, nil)

	plan := func(target int) Publication {
		return Publication{Message: &Message{Project: testProject, URL: url, Method: "POST", RunID: "wfr_l", CallType: CallStep,
			Body: []byte(`{"stepId":0,"concurrent":3,"targetStep":` + string(rune('0'+target)) + `}`)}}
	}
	_, err := b.engine.PublishAll(t.Context(), []Publication{plan(1), plan(2), plan(3)})
	require.ErrorIs(t, err, ErrRunLimit, "parallel group over the limit")

	b.step(t, url, "wfr_l", `{"stepId":1}`)
	b.step(t, url, "wfr_l", `{"stepId":2}`)
	_, err = b.engine.PublishAll(t.Context(), []Publication{{Message: &Message{Project: testProject, URL: url, Method: "POST", RunID: "wfr_l", CallType: CallStep, Body: []byte(`{"stepId":3}`)}}})
	require.ErrorIs(t, err, ErrRunLimit, "history over the step limit")

	_, err = b.engine.PublishAll(t.Context(), []Publication{{Message: &Message{Project: testProject, URL: url, Method: "POST", RunID: "wfr_deep"}, Init: &RunInit{InvokeDepth: 3}}})
	require.ErrorIs(t, err, ErrRunLimit, "invoke depth over the limit")

	err = b.engine.Wait(t.Context(), WaitRequest{Project: testProject, EventID: "e", RunID: "wfr_l", Timeout: 400 * 24 * time.Hour, Resume: &Message{}, OnTimeout: &Message{}})
	require.ErrorIs(t, err, ErrRunLimit, "wait timeout over the limit")
}

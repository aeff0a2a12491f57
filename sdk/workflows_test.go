package sdk

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// triggerEntries decodes the /v2/batch body of a trigger.
func triggerEntries(t *testing.T, body []byte) []batchEntry {
	t.Helper()
	var entries []batchEntry
	require.NoError(t, json.Unmarshal(body, &entries))
	return entries
}

func TestTrigger(t *testing.T) {
	t.Parallel()

	t.Run("FullRequest", func(t *testing.T) {
		t.Parallel()
		c, fake := newClientWithFake(t, http.StatusCreated, `[{"messageId":"msg_1"}]`)
		retries := 2
		res, err := c.Trigger(context.Background(), TriggerRequest{
			URL:         "http://127.0.0.1:3000/wf?x=1",
			BodyJSON:    map[string]int{"n": 1},
			RunID:       "order-42",
			Headers:     http.Header{"X-Tenant": {"t1"}},
			Retries:     &retries,
			RetryDelay:  "100",
			Delay:       10 * time.Second,
			NotBefore:   time.Unix(1700000000, 0),
			Labels:      []string{"lbl"},
			FlowControl: &FlowControl{Key: "fc", Parallelism: 1, Rate: 5, Period: 2 * time.Second},
			FailureURL:  "http://127.0.0.1:3000/failed",
		})
		require.NoError(t, err)
		require.Equal(t, TriggerResult{RunID: "wfr_order-42", MessageID: "msg_1"}, res)

		got := fake.last(t)
		require.Equal(t, http.MethodPost, got.Method)
		require.Equal(t, "/v2/batch", got.RequestURI)
		entries := triggerEntries(t, got.Body)
		require.Len(t, entries, 1)
		require.Equal(t, "http://127.0.0.1:3000/wf?x=1", entries[0].Destination)
		require.Equal(t, `{"n":1}`, entries[0].Body)
		require.Equal(t, map[string]string{
			"upstash-workflow-init":                        "true",
			"upstash-workflow-runid":                       "wfr_order-42",
			"upstash-workflow-url":                         "http://127.0.0.1:3000/wf?x=1",
			"upstash-workflow-sdk-version":                 "1",
			"upstash-forward-upstash-workflow-sdk-version": "1",
			"upstash-feature-set":                          "LazyFetch,InitialBody,WF_DetectTrigger,WF_TriggerOnConfig",
			"upstash-method":                               "POST",
			"content-type":                                 "application/json",
			"upstash-retries":                              "2",
			"upstash-retry-delay":                          "100",
			"upstash-flow-control-key":                     "fc",
			"upstash-flow-control-value":                   "parallelism=1, rate=5, period=2s",
			"upstash-forward-x-tenant":                     "t1",
			"upstash-label":                                "lbl",
			"upstash-forward-upstash-label":                "lbl",
			"upstash-delay":                                "10s",
			"upstash-not-before":                           "1700000000",

			"upstash-failure-callback":                                           "http://127.0.0.1:3000/failed",
			"upstash-failure-callback-forward-upstash-workflow-is-failure":       "true",
			"upstash-failure-callback-forward-upstash-workflow-failure-callback": "true",
			"upstash-failure-callback-workflow-runid":                            "wfr_order-42",
			"upstash-failure-callback-workflow-init":                             "false",
			"upstash-failure-callback-workflow-url":                              "http://127.0.0.1:3000/wf?x=1",
			"upstash-failure-callback-workflow-calltype":                         "failureCall",
			"upstash-failure-callback-feature-set":                               "LazyFetch,InitialBody,WF_DetectTrigger,WF_TriggerOnConfig",
			"upstash-failure-callback-retries":                                   "2",
			"upstash-failure-callback-retry-delay":                               "100",
			"upstash-failure-callback-flow-control-key":                          "fc",
			"upstash-failure-callback-flow-control-value":                        "parallelism=1, rate=5, period=2s",
			"upstash-failure-callback-forward-x-tenant":                          "t1",
			"upstash-failure-callback-forward-upstash-label":                     "lbl",
		}, entries[0].Headers)
	})

	t.Run("Minimal", func(t *testing.T) {
		t.Parallel()
		c, fake := newClientWithFake(t, http.StatusCreated, `[{"messageId":"msg_1","deduplicated":true}]`)
		three := 3
		res, err := c.Trigger(context.Background(), TriggerRequest{URL: "http://wf/a", Body: []byte("plain"), Retries: &three,
			Headers: http.Header{"Content-Type": {"text/plain"}}})
		require.NoError(t, err)
		require.True(t, res.Deduplicated)
		require.True(t, strings.HasPrefix(res.RunID, "wfr_"), res.RunID)
		require.Greater(t, len(res.RunID), len("wfr_")+16, "a random id")

		h := triggerEntries(t, fake.last(t).Body)[0].Headers
		require.Equal(t, "http://wf/a", h["upstash-failure-callback"], "the failure URL defaults to the workflow URL")
		require.Equal(t, "text/plain", h["content-type"])
		require.Equal(t, res.RunID, h["upstash-workflow-runid"])
		for _, name := range []string{"upstash-retries", "upstash-failure-callback-retries", "upstash-retry-delay", "upstash-flow-control-key", "upstash-label", "upstash-delay", "upstash-not-before"} {
			require.NotContains(t, h, name, "3 retries is the default and is omitted, as the official SDK does")
		}
	})

	t.Run("RunIDPrefixKept", func(t *testing.T) {
		t.Parallel()
		c, _ := newClientWithFake(t, http.StatusCreated, `[{"messageId":"msg_1"}]`)
		res, err := c.Trigger(context.Background(), TriggerRequest{URL: "http://wf/a", RunID: "wfr_abc"})
		require.NoError(t, err)
		require.Equal(t, "wfr_abc", res.RunID)
	})

	t.Run("Many", func(t *testing.T) {
		t.Parallel()
		c, fake := newClientWithFake(t, http.StatusCreated, `[{"messageId":"msg_1"},{"messageId":"msg_2"}]`)
		res, err := c.TriggerMany(context.Background(), []TriggerRequest{{URL: "http://wf/a"}, {URL: "http://wf/b", RunID: "b"}})
		require.NoError(t, err)
		require.Len(t, res, 2)
		require.Equal(t, "wfr_b", res[1].RunID)
		require.Equal(t, "msg_2", res[1].MessageID)
		require.Len(t, triggerEntries(t, fake.last(t).Body), 2)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		c, _ := newClientWithFake(t, http.StatusCreated, `[]`)
		ctx := context.Background()
		_, err := c.Trigger(ctx, TriggerRequest{})
		require.Error(t, err)
		_, err = c.Trigger(ctx, TriggerRequest{URL: "http://wf", Labels: []string{"bad label"}})
		require.ErrorContains(t, err, "label")
		_, err = c.Trigger(ctx, TriggerRequest{URL: "http://wf", FlowControl: &FlowControl{Key: "k"}})
		require.Error(t, err)
		_, err = c.Trigger(ctx, TriggerRequest{URL: "http://wf", Body: []byte{0xfe}})
		require.ErrorContains(t, err, "UTF-8")
	})
}

func TestRunLogsDecode(t *testing.T) {
	t.Parallel()
	answer := `{"cursor":"next","runs":[{"workflowRunId":"wfr_1","workflowUrl":"http://wf","workflowState":"RUN_SUCCESS",
		"workflowRunCreatedAt":1,"workflowRunCompletedAt":2,"workflowRunResponse":"\"done\"","labels":["a"],
		"steps":[{"type":"sequential","steps":[{"messageId":"msg_0","callType":"step","state":"STEP_SUCCESS","createdAt":1,
			"stepId":0,"stepName":"init","stepType":"Initial","out":"payload"}]},
		{"type":"parallel","steps":[{"messageId":"msg_1","callType":"step","state":"STEP_SUCCESS","createdAt":2,
			"stepId":1,"stepName":"a","stepType":"Run","out":"{\"x\":1}","concurrent":2}]}],
		"failureFunction":{"messageId":"msg_f","url":"http://wf","state":"CALLBACK_SUCCESS"}}]}`
	c, _ := newClientWithFake(t, http.StatusOK, answer)
	page, err := c.RunLogs(context.Background(), RunLogsRequest{RunID: "wfr_1"})
	require.NoError(t, err)
	require.Equal(t, "next", page.Cursor)
	require.Len(t, page.Runs, 1)
	run := page.Runs[0]
	require.Equal(t, RunSuccess, run.State)
	require.Equal(t, `"done"`, *run.Response)
	require.Equal(t, "CALLBACK_SUCCESS", run.FailureFunction.State)
	require.Len(t, run.Steps, 2)
	step := run.Steps[1].Steps[0]
	require.Equal(t, "parallel", run.Steps[1].Type)
	require.Equal(t, 1, step.StepID())
	require.Equal(t, "a", step.StepName())
	require.Equal(t, "Run", step.StepType())
	require.Equal(t, "msg_1", step.MessageID())
	require.Equal(t, "step", step.CallType())
	require.Equal(t, int64(2), step.CreatedAt())
	var out string
	require.NoError(t, json.Unmarshal(step.Out(), &out))
	require.Equal(t, `{"x":1}`, out)
	require.Equal(t, "Initial", run.Steps[0].Steps[0].StepType())
	require.Equal(t, 0, StepLog{"stepId": json.RawMessage(`"oops"`)}.StepID(), "a mistyped field reads as zero")
}

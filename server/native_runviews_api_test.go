package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/sdk"
)

// fullRun is GET /runs/{id} with the fields the run views add.
type fullRun struct {
	RunID  string
	Status string
	Steps  []struct {
		Name      string
		Type      string
		Status    string
		StartedAt int64
		EndedAt   int64
		Out       json.RawMessage
		Error     *struct {
			Code    string
			Message string
			Status  int
		}
	}
	Error *struct {
		Code    string
		Message string
		Step    string
		Status  int
	}
	CancelledBy map[string]any
}

func (e *apiEnv) fullRun(t *testing.T, id string) (fullRun, map[string]json.RawMessage) {
	t.Helper()
	r := e.call(t, http.MethodGet, "/runs/"+id, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.Body, &raw))
	return decodeJSON[fullRun](t, r), raw
}

// A run whose endpoint answered 500 until its retries ran out says so: the run's error
// is retries_exhausted with status 500, and its last step is the failed one.
func TestRunViewRetriesExhausted(t *testing.T) {
	t.Parallel()
	ep := deliverytest.NewEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		return http.StatusInternalServerError, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, `{"error":"boom","message":"db down"}`
	})
	env := newAPI(t, envOptions{})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"event": "e"}], "retries": 1}]}`, ep.URL("/wf")))
	runID := env.sendEvents(t, `{"name": "e", "data": {}}`)[0].Runs[0].RunID
	env.eventuallyRunStatus(t, runID, "failed")
	run, _ := env.fullRun(t, runID)
	require.NotNil(t, run.Error)
	require.Equal(t, "retries_exhausted", run.Error.Code)
	require.Equal(t, 500, run.Error.Status)
	require.Equal(t, "endpoint answered 500, 2 attempts: db down", run.Error.Message)
	require.Len(t, run.Steps, 1)
	last := run.Steps[0]
	require.Equal(t, "failed", last.Status)
	require.NotNil(t, last.Error)
	require.Equal(t, "retries_exhausted", last.Error.Code)
	require.Equal(t, 500, last.Error.Status)
	require.Nil(t, run.CancelledBy)
}

// A step's out is its value as JSON: a step that returned {v:1} shows the object
// {"v":1}, a string stays a string, a Wait step's event data is decoded; steps are
// always present, startedAt on each; an API cancel says {"api": true}.
func TestRunViewStepsAndCancel(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	url := app.mount("/wf", func(c *sdk.Context) (any, error) {
		if _, err := c.WaitForEvent("first", "go.on", time.Hour); err != nil {
			return nil, err
		}
		if _, err := sdk.Run(c, "obj", func() (map[string]int, error) { return map[string]int{"v": 1}, nil }); err != nil {
			return nil, err
		}
		if _, err := sdk.Run(c, "str", func() (string, error) { return "hi", nil }); err != nil {
			return nil, err
		}
		_, err := c.WaitForEvent("hold", "never", time.Hour)
		return nil, err
	})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"event": "e"}]}]}`, url))
	runID := env.sendEvents(t, `{"name": "e", "data": {}}`)[0].Runs[0].RunID
	env.eventuallyRunStatus(t, runID, "waiting")
	run, raw := env.fullRun(t, runID)
	require.JSONEq(t, `[]`, string(raw["steps"]), "a run without steps shows steps: []")
	require.Empty(t, run.Steps)

	env.sendEvents(t, `{"name": "go.on", "data": {"k": [1, 2]}}`)
	eventually(t, "the run waits again", func() bool {
		run, _ = env.fullRun(t, runID)
		return run.Status == "waiting" && len(run.Steps) == 3
	})
	require.Equal(t, "Wait", run.Steps[0].Type)
	require.JSONEq(t, `{"k": [1, 2]}`, string(run.Steps[0].Out), "the event data, decoded")
	require.Equal(t, `{"v":1}`, string(run.Steps[1].Out), "an object stays an object")
	require.Equal(t, `"hi"`, string(run.Steps[2].Out))
	for i, s := range run.Steps {
		require.NotZero(t, s.StartedAt, "step %d", i)
		require.GreaterOrEqual(t, s.EndedAt, s.StartedAt, "step %d", i)
	}

	r := env.call(t, http.MethodPost, "/runs/"+runID+"/cancel", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	run, _ = env.fullRun(t, runID)
	require.Equal(t, "cancelled", run.Status)
	require.Equal(t, map[string]any{"api": true}, run.CancelledBy)
	require.Nil(t, run.Error)
}

// A singleton in cancel mode cancels the holder for the run that replaces it, and the
// holder's view names that run.
func TestRunViewCancelledBySingleton(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	url := app.mount("/wf", func(c *sdk.Context) (any, error) {
		_, err := c.WaitForEvent("hold", "never", time.Hour)
		return nil, err
	})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"event": "e"}], "singleton": {}}]}`, url))
	first := env.sendEvents(t, `{"name": "e", "data": {}}`)[0].Runs[0].RunID
	env.eventuallyRunStatus(t, first, "waiting")
	second := env.sendEvents(t, `{"name": "e", "data": {}}`)[0].Runs[0].RunID
	run, _ := env.fullRun(t, first)
	require.Equal(t, "cancelled", run.Status)
	require.Equal(t, map[string]any{"singleton": second}, run.CancelledBy)
}

// A run that fails because the child it invoked failed says invoke_failed, naming the
// invoke step.
func TestRunViewInvokeFailed(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	child := app.mount("/child", func(c *sdk.Context) (any, error) {
		return nil, errors.New("child broke")
	})
	parent := app.mount("/parent", func(c *sdk.Context) (any, error) {
		zero := 0
		res, err := c.Invoke("call-child", sdk.InvokeRequest{URL: child, Body: []byte(`{}`), Retries: &zero})
		if err != nil {
			return nil, err
		}
		if res.IsFailed {
			return nil, errors.New("the child failed")
		}
		return nil, nil
	})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "parent", "url": %q, "triggers": [{"event": "e"}], "retries": 0}]}`, parent))
	runID := env.sendEvents(t, `{"name": "e", "data": {}}`)[0].Runs[0].RunID
	env.eventuallyRunStatus(t, runID, "failed")
	run, _ := env.fullRun(t, runID)
	require.NotNil(t, run.Error)
	require.Equal(t, "invoke_failed", run.Error.Code)
	require.Equal(t, "call-child", run.Error.Step)
}

// A run whose endpoint did not answer in time says timeout; an endpoint that refuses
// for good (489 non-retryable) says non_retryable with its message.
func TestRunViewTimeoutAndNonRetryable(t *testing.T) {
	t.Parallel()
	ep := deliverytest.NewEndpoint(t, func(r *http.Request, _ int) (int, http.Header, string) {
		h := http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}
		if r.URL.Path == "/slow" {
			time.Sleep(time.Second)
			return http.StatusOK, h, "{}"
		}
		h.Set("Upstash-Nonretryable-Error", "true")
		return 489, h, `{"error":"WorkflowNonRetryableError","message":"bad input"}`
	})
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.DefaultTimeout = 200 * time.Millisecond }})
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [
		{"name": "slow", "url": %q, "triggers": [{"event": "slow"}], "retries": 0},
		{"name": "refuse", "url": %q, "triggers": [{"event": "refuse"}], "retries": 3}]}`, ep.URL("/slow"), ep.URL("/refuse")))
	slow := env.sendEvents(t, `{"name": "slow", "data": {}}`)[0].Runs[0].RunID
	refuse := env.sendEvents(t, `{"name": "refuse", "data": {}}`)[0].Runs[0].RunID
	env.eventuallyRunStatus(t, slow, "failed")
	env.eventuallyRunStatus(t, refuse, "failed")
	run, _ := env.fullRun(t, slow)
	require.Equal(t, "timeout", run.Error.Code)
	run, _ = env.fullRun(t, refuse)
	require.Equal(t, "non_retryable", run.Error.Code)
	require.Equal(t, 489, run.Error.Status)
	require.Equal(t, "non-retryable error: bad input", run.Error.Message)
}

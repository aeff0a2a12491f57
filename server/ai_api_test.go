package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk"
)

// aiUsage is the usage of a run or a step as the run view shows it.
type aiUsage struct {
	Model        string  `json:"model"`
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	Tokens       int64   `json:"tokens"`
	Cost         float64 `json:"cost"`
}

type aiRunView struct {
	RunID  string
	Status string
	DLQID  string `json:"dlqId"`
	Usage  *aiUsage
	Cap    *flowctl.Cap
	Steps  []struct {
		ID    int
		Name  string
		Type  string
		Usage *aiUsage
	}
}

func (e *apiEnv) aiRun(t *testing.T, id string) aiRunView {
	t.Helper()
	r := e.call(t, http.MethodGet, "/runs/"+id, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return decodeJSON[aiRunView](t, r)
}

// budgetFailures records what a failure function saw.
type budgetFailures struct {
	mu   sync.Mutex
	seen []*sdk.FailureContext
	sig  deliverytest.Signal[string]
}

func (b *budgetFailures) fn(f *sdk.FailureContext) (any, error) {
	b.mu.Lock()
	b.seen = append(b.seen, f)
	b.mu.Unlock()
	b.sig.Emit(f.RunID)
	return "noted", nil
}

const testAPIKey = "sk-test-secret-0123456789"

func testAIPrices(t *testing.T) *flowctl.AIPrices {
	p, err := flowctl.ParseAIPrices([]byte(`{"models": {"mock-1": {"input": 10, "output": 10}, "mock-2": {"input": 1, "output": 2}}}`))
	require.NoError(t, err)
	return p
}

// TestAICapMaxTokensSequential: cap {maxTokens: 1000}, 400 tokens per call, five
// sequential AI steps: exactly 3 calls reach the provider, the run fails budget_exceeded
// once (no retry), the failure function gets a *BudgetError, a dead letter is made, usage
// is 1,200; replay with a raised cap runs steps 4 and 5 only, and the raised cap is kept.
func TestAICapMaxTokensSequential(t *testing.T) {
	t.Parallel()
	llm := deliverytest.NewLLM(t, deliverytest.LLMUsage{Input: 300, Output: 100})
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.AIPrices = testAIPrices(t) }})
	app := newSDKApp(t, env)
	var fails budgetFailures
	url := app.srv.URL + "/chat"
	app.mux.Handle("/chat", sdk.Serve(func(c *sdk.Context) (any, error) {
		var answers []string
		for i := 1; i <= 5; i++ {
			res, err := sdk.AI(c, fmt.Sprintf("ask-%d", i), sdk.AIRequest{
				BaseURL: llm.URL() + "/v1", APIKey: testAPIKey, Retries: 3,
				Chat: sdk.ChatRequest{Model: "mock-1", MaxTokens: 100, Messages: []sdk.ChatMessage{{Role: "user", Content: fmt.Sprintf("question %d", i)}}},
			})
			if err != nil {
				return nil, err
			}
			answers = append(answers, res.Text())
		}
		return answers, nil
	}, sdk.WithServeEnv(app.env), sdk.WithFailureFunction(fails.fn)))
	env.mustPutApp(t, "ai", fmt.Sprintf(`{"workflows": [{"name": "chat", "url": %q, "triggers": [{"event": "go"}], "retries": 3,
		"cap": {"maxTokens": 1000}}]}`, url))
	runID := env.sendEvents(t, `{"name": "go", "data": {}}`)[0].Runs[0].RunID

	env.eventuallyRunStatus(t, runID, "failed")
	fails.sig.Wait(t, waitTimeout, 1, nil)
	require.Equal(t, 3, llm.Count(), "exactly three calls reached the provider")
	run := env.aiRun(t, runID)
	require.Equal(t, &aiUsage{InputTokens: 900, OutputTokens: 300, Tokens: 1200, Cost: run.Usage.Cost}, run.Usage)
	require.InDelta(t, 3*(300*10.0+100*10.0)/1e6, run.Usage.Cost, 1e-12, "usage × mock-1's price")
	require.NotEmpty(t, run.DLQID, "a budget stop leaves a dead letter")
	view, _ := env.fullRun(t, runID)
	require.NotNil(t, view.Error, "the view says why the run failed")
	require.Equal(t, "budget_exceeded", view.Error.Code)
	require.Equal(t, "budget_exceeded", view.Steps[len(view.Steps)-1].Error.Code, "the failed step says so too")
	var metered []int
	for _, s := range run.Steps {
		if s.Usage != nil {
			require.Equal(t, aiUsage{Model: "mock-1", InputTokens: 300, OutputTokens: 100, Tokens: 400, Cost: s.Usage.Cost}, *s.Usage)
			require.InDelta(t, 0.004, s.Usage.Cost, 1e-12)
			metered = append(metered, s.ID)
		}
	}
	require.Equal(t, []int{1, 2, 3}, metered, "each AI step shows its usage")

	fails.mu.Lock()
	require.Len(t, fails.seen, 1, "the failure function is called once: the budget stop is not retried")
	f := fails.seen[0]
	fails.mu.Unlock()
	require.Equal(t, http.StatusPaymentRequired, f.FailStatus)
	require.True(t, errors.Is(f.Err, sdk.ErrBudget), "%v", f.Err)
	var be *sdk.BudgetError
	require.True(t, errors.As(f.Err, &be))
	require.Equal(t, "budget_exceeded", be.Code)
	require.Equal(t, int64(1200), be.Spent.Tokens)
	require.Equal(t, int64(1000), *be.MaxTokens)
	require.Contains(t, f.FailResponse, "budget_exceeded")

	// The provider key went to the provider only: no view shows it.
	for _, c := range llm.Calls.All() {
		require.Equal(t, "Bearer "+testAPIKey, c.Authorization)
	}
	for _, path := range []string{"/runs/" + runID, "/v2/workflows/logs?workflowRunId=" + runID, "/v2/workflows/dlq", "/v2/dlq", "/v2/logs", "/v2/messages/" + run.DLQID} {
		r := env.call(t, http.MethodGet, path, nil)
		require.NotContains(t, string(r.Body), testAPIKey, "GET %s shows the provider key", path)
	}
	logs := env.call(t, http.MethodGet, "/v2/workflows/logs?workflowRunId="+runID, nil)
	require.Equal(t, http.StatusOK, logs.Status)
	require.Contains(t, string(logs.Body), `"usage":{"inputTokens":900,"outputTokens":300,"tokens":1200,"cost":0.012}`)
	require.Contains(t, string(logs.Body), `"usage":{"model":"mock-1","inputTokens":300,"outputTokens":100,"tokens":400,"cost":0.004}`)

	// A bad cap is refused and changes nothing.
	r := env.call(t, http.MethodPost, "/runs/"+runID+"/replay", []byte(`{"cap": {"maxTokens": 0}}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "cap.maxTokens")
	require.Equal(t, "failed", env.aiRun(t, runID).Status)

	// Replay under a raised cap: steps 4 and 5 call the provider, nothing earlier again.
	r = env.call(t, http.MethodPost, "/runs/"+runID+"/replay", []byte(`{"cap": {"maxTokens": 5000}}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	env.eventuallyRunStatus(t, runID, "succeeded")
	calls := llm.Calls.All()
	require.Len(t, calls, 5)
	for i, c := range calls {
		require.Contains(t, string(c.Body), fmt.Sprintf("question %d", i+1), "call %d", i+1)
	}
	run = env.aiRun(t, runID)
	require.Equal(t, &aiUsage{InputTokens: 1500, OutputTokens: 500, Tokens: 2000, Cost: run.Usage.Cost}, run.Usage)
	require.InDelta(t, 5*(300*10.0+100*10.0)/1e6, run.Usage.Cost, 1e-12)
	require.Equal(t, int64(5000), *run.Cap.MaxTokens, "the raised cap is the run's")
}

// publishCalls publishes AI calls of run runID the way a workflow SDK does (protocol
// §5.6): toCallback messages to the provider, their callbacks to the workflow URL.
func publishCalls(t *testing.T, env *apiEnv, runID, workflowURL, llmURL string, stepIDs ...int) {
	t.Helper()
	r := publishCallsTo(t, env, runID, workflowURL, llmURL+"/v1/chat/completions", nil, stepIDs...)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
}

// publishCallsTo is publishCalls to any URL, with extra publish headers.
func publishCallsTo(t *testing.T, env *apiEnv, runID, workflowURL, url string, extra map[string]string, stepIDs ...int) apiResponse {
	t.Helper()
	var entries []string
	for _, id := range stepIDs {
		h := map[string]string{
			"Upstash-Workflow-RunId": runID, "Upstash-Workflow-Url": workflowURL, "Upstash-Workflow-Init": "false",
			"Upstash-Workflow-CallType": "toCallback", "Upstash-Method": "POST", "Upstash-Retries": "2",
			"Upstash-Forward-Authorization": "Bearer " + testAPIKey, "Content-Type": "application/json",
			"Upstash-Callback": workflowURL, "Upstash-Callback-Workflow-RunId": runID, "Upstash-Callback-Workflow-CallType": "fromCallback",
			"Upstash-Callback-Workflow-Init": "false", "Upstash-Callback-Workflow-Url": workflowURL,
			"Upstash-Callback-Forward-Upstash-Workflow-Callback": "true",
			"Upstash-Callback-Forward-Upstash-Workflow-StepId":   fmt.Sprint(id),
			"Upstash-Callback-Forward-Upstash-Workflow-StepName": fmt.Sprintf("ask-%d", id),
			"Upstash-Callback-Forward-Upstash-Workflow-StepType": "Call",
		}
		for k, v := range extra {
			h[k] = v
		}
		hj := []string{}
		for k, v := range h {
			hj = append(hj, fmt.Sprintf("%q: %q", k, v))
		}
		body := fmt.Sprintf(`{"model": "mock-1", "max_tokens": 1000, "messages": [{"role": "user", "content": "q%d"}]}`, id)
		entries = append(entries, fmt.Sprintf(`{"destination": %q, "headers": {%s}, "body": %q}`, url, strings.Join(hj, ","), body))
	}
	return env.call(t, http.MethodPost, "/v2/batch", []byte("["+strings.Join(entries, ",")+"]"), "Content-Type", "application/json")
}

// TestAIMarkerHeader: a call whose path is no AI route is metered when its publish says
// Duraton-Ai (the Go SDK's marker); an unknown marker value is a 400 and stores nothing.
func TestAIMarkerHeader(t *testing.T) {
	t.Parallel()
	llm := deliverytest.NewLLM(t, deliverytest.LLMUsage{Input: 7, Output: 3})
	wf := deliverytest.NewEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		return http.StatusOK, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, "{}"
	})
	env := newAPI(t, envOptions{})
	wfURL := wf.URL("/wf")
	env.mustPutApp(t, "ai", fmt.Sprintf(`{"workflows": [{"name": "proxy", "url": %q, "triggers": [{"event": "go"}]}]}`, wfURL))
	runID := env.sendEvents(t, `{"name": "go", "data": {}}`)[0].Runs[0].RunID
	wf.Requests.Wait(t, waitTimeout, 1, nil)

	r := publishCallsTo(t, env, runID, wfURL, llm.URL()+"/proxy/generate", map[string]string{"Duraton-Ai": "gemini"}, 1)
	require.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	require.Contains(t, r.errorMessage(t), "Duraton-Ai")
	r = publishCallsTo(t, env, runID, wfURL, llm.URL()+"/proxy/generate", nil, 1)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	r = publishCallsTo(t, env, runID, wfURL, llm.URL()+"/proxy/generate", map[string]string{"Duraton-Ai": "openai"}, 2)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	wf.Requests.Wait(t, waitTimeout, 2, func(r deliverytest.Request) bool { return r.Header.Get("Upstash-Workflow-Callback") == "true" })
	require.Equal(t, 2, llm.Count(), "both calls reached the provider (the refused one did not)")
	run := env.aiRun(t, runID)
	require.Equal(t, &aiUsage{InputTokens: 7, OutputTokens: 3, Tokens: 10}, run.Usage, "only the marked call is metered")
}

// TestAICapMaxCostParallel: cap {maxCost: 1.5}, four parallel AI calls of 0.4 USD each
// all start (the spend was 0 when each was checked), then a fifth does not: 4 calls, the
// run fails budget_exceeded, and the recorded cost is the mock's usage × the price.
func TestAICapMaxCostParallel(t *testing.T) {
	t.Parallel()
	llm := deliverytest.NewLLM(t, deliverytest.LLMUsage{Input: 30_000, Output: 10_000})
	wf := deliverytest.NewEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		return http.StatusOK, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, "{}"
	})
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.AIPrices = testAIPrices(t) }})
	wfURL := wf.URL("/wf")
	env.mustPutApp(t, "ai", fmt.Sprintf(`{"workflows": [{"name": "fan", "url": %q, "triggers": [{"event": "go"}], "cap": {"maxCost": 1.5}}]}`, wfURL))
	runID := env.sendEvents(t, `{"name": "go", "data": {}}`)[0].Runs[0].RunID
	wf.Requests.Wait(t, waitTimeout, 1, nil) // the run's first delivery

	publishCalls(t, env, runID, wfURL, llm.URL(), 1, 2, 3, 4)
	callbacks := func(r deliverytest.Request) bool { return r.Header.Get("Upstash-Workflow-Callback") == "true" }
	wf.Requests.Wait(t, waitTimeout, 4, callbacks)
	require.Equal(t, 4, llm.Count())
	run := env.aiRun(t, runID)
	want := 4 * (30_000*10.0 + 10_000*10.0) / 1e6 // the mock's usage × mock-1's price
	require.InDelta(t, want, run.Usage.Cost, 1e-12)
	require.Equal(t, int64(160_000), run.Usage.Tokens)

	publishCalls(t, env, runID, wfURL, llm.URL(), 5)
	env.eventuallyRunStatus(t, runID, "failed")
	failure := wf.Requests.Wait(t, waitTimeout, 1, func(r deliverytest.Request) bool {
		return r.Header.Get("Upstash-Workflow-Failure-Callback") == "true"
	})[0]
	require.Contains(t, string(failure.Body), `"status":402`)
	require.Equal(t, 4, llm.Count(), "the fifth call did not start")
	require.InDelta(t, want, env.aiRun(t, runID).Usage.Cost, 1e-12)
}

// TestAIMeteringShapes: an Anthropic-shaped call recognised by its path is metered; a
// provider-reported usage.cost wins over the price table; a call to another path is not
// an AI step; a maxCost cap with an unpriced model is refused at the step.
func TestAIMeteringShapes(t *testing.T) {
	t.Parallel()
	reported := 0.0421
	llm := deliverytest.NewLLM(t, deliverytest.LLMUsage{Input: 50, Output: 20, Cost: &reported})
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.AIPrices = testAIPrices(t) }})
	app := newSDKApp(t, env)
	var fails budgetFailures
	app.mux.Handle("/claude", sdk.Serve(func(c *sdk.Context) (any, error) {
		h := http.Header{"X-Api-Key": {testAPIKey}, "Anthropic-Version": {"2023-06-01"}}
		if _, err := c.Call("claude", sdk.CallRequest{URL: llm.URL() + "/v1/messages", Header: h,
			Body: []byte(`{"model": "mock-2", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}`)}); err != nil {
			return nil, err
		}
		_, err := c.Call("plain", sdk.CallRequest{URL: llm.URL() + "/v1/chat/completions/other", Header: h, Body: []byte(`{"model": "mock-2"}`)})
		return "done", err
	}, sdk.WithServeEnv(app.env)))
	app.mux.Handle("/unpriced", sdk.Serve(func(c *sdk.Context) (any, error) {
		_, err := sdk.AI(c, "ask", sdk.AIRequest{BaseURL: llm.URL() + "/v1", Chat: sdk.ChatRequest{Model: "unpriced-9", Messages: []sdk.ChatMessage{{Role: "user", Content: "x"}}}})
		return nil, err
	}, sdk.WithServeEnv(app.env), sdk.WithFailureFunction(fails.fn)))
	env.mustPutApp(t, "ai", fmt.Sprintf(`{"workflows": [
		{"name": "claude", "url": %q, "triggers": [{"event": "claude"}]},
		{"name": "unpriced", "url": %q, "triggers": [{"event": "unpriced"}], "cap": {"maxCost": 10}}]}`,
		app.srv.URL+"/claude", app.srv.URL+"/unpriced"))

	runID := env.sendEvents(t, `{"name": "claude", "data": {}}`)[0].Runs[0].RunID
	env.eventuallyRunStatus(t, runID, "succeeded")
	run := env.aiRun(t, runID)
	require.Equal(t, &aiUsage{InputTokens: 50, OutputTokens: 20, Tokens: 70, Cost: reported}, run.Usage, "the provider's cost wins; the other path is not metered")
	require.Equal(t, 2, llm.Count(), "both calls reached the mock")
	require.Equal(t, "/v1/chat/completions/other", llm.Calls.All()[1].Path)

	runID = env.sendEvents(t, `{"name": "unpriced", "data": {}}`)[0].Runs[0].RunID
	env.eventuallyRunStatus(t, runID, "failed")
	fails.sig.Wait(t, waitTimeout, 1, nil)
	require.Equal(t, 2, llm.Count(), "the unpriced call did not start")
	fails.mu.Lock()
	defer fails.mu.Unlock()
	var be *sdk.BudgetError
	require.True(t, errors.As(fails.seen[0].Err, &be), "%v", fails.seen[0].Err)
	require.Equal(t, "ai_price_unknown", be.Code)
	require.Contains(t, be.Message, `"unpriced-9"`)
}

// TestAIPricesRoute: GET /ai/prices shows the table in force; none configured is empty.
func TestAIPricesRoute(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.AIPrices = testAIPrices(t) }})
	r := env.call(t, http.MethodGet, "/ai/prices", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.JSONEq(t, `{"models": {"mock-1": {"input": 10, "output": 10}, "mock-2": {"input": 1, "output": 2}}}`, string(r.Body))
	bare := newAPI(t, envOptions{})
	r = bare.call(t, http.MethodGet, "/ai/prices", nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.JSONEq(t, `{"models": {}}`, string(r.Body))
	req := bare.request(t, http.MethodGet, "/ai/prices", nil)
	req.Header.Del("Authorization")
	require.Equal(t, http.StatusUnauthorized, bare.send(t, req).Status)
}

// TestAIUnreachableProviderIsAnError: an AI step whose provider cannot be reached
// (nothing listens on port 1) with no retries fails the run with an *AIError of status 0;
// it is never recorded as a success with an empty completion.
func TestAIUnreachableProviderIsAnError(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	var fails budgetFailures
	var mu sync.Mutex
	var stepErr error
	app.mux.Handle("/unreachable", sdk.Serve(func(c *sdk.Context) (any, error) {
		res, err := sdk.AI(c, "ask", sdk.AIRequest{BaseURL: "http://127.0.0.1:1/v1", Retries: 0,
			Chat: sdk.ChatRequest{Model: "mock-1", Messages: []sdk.ChatMessage{{Role: "user", Content: "x"}}}})
		mu.Lock()
		stepErr = err
		mu.Unlock()
		if err != nil {
			return nil, err
		}
		return res.Text(), nil
	}, sdk.WithServeEnv(app.env), sdk.WithFailureFunction(fails.fn)))
	env.mustPutApp(t, "ai", fmt.Sprintf(`{"workflows": [{"name": "unreachable", "url": %q, "triggers": [{"event": "go"}], "retries": 0}]}`,
		app.srv.URL+"/unreachable"))
	runID := env.sendEvents(t, `{"name": "go", "data": {}}`)[0].Runs[0].RunID

	env.eventuallyRunStatus(t, runID, "failed")
	mu.Lock()
	defer mu.Unlock()
	var ae *sdk.AIError
	require.True(t, errors.As(stepErr, &ae), "sdk.AI returned %v", stepErr)
	require.Equal(t, 0, ae.Status)
	require.Contains(t, ae.Error(), "no answer")
}

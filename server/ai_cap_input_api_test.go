package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/sdk"
)

// TestAICapProjectsInputTokens: cap {maxTokens: 1000}, five sequential AI steps whose
// prompts are about 300 tokens (900 bytes) and whose calls spend 300 input + 100 output
// tokens: the check before each call projects its input (the request's size / 3) and
// its max tokens, so the run stops after 2 calls, having spent 800, never crossing its
// cap (without the input, a third call was let through to 1,200).
func TestAICapProjectsInputTokens(t *testing.T) {
	t.Parallel()
	llm := deliverytest.NewLLM(t, deliverytest.LLMUsage{Input: 300, Output: 100})
	env := newAPI(t, envOptions{engine: func(c *delivery.Config) { c.AIPrices = testAIPrices(t) }})
	app := newSDKApp(t, env)
	var fails budgetFailures
	url := app.srv.URL + "/chat"
	prompt := strings.Repeat("ab ", 300) // 900 bytes
	app.mux.Handle("/chat", sdk.Serve(func(c *sdk.Context) (any, error) {
		for i := 1; i <= 5; i++ {
			_, err := sdk.AI(c, fmt.Sprintf("ask-%d", i), sdk.AIRequest{
				BaseURL: llm.URL() + "/v1", APIKey: testAPIKey, Retries: 3,
				Chat: sdk.ChatRequest{Model: "mock-1", MaxTokens: 100, Messages: []sdk.ChatMessage{{Role: "user", Content: prompt}}},
			})
			if err != nil {
				return nil, err
			}
		}
		return nil, nil
	}, sdk.WithServeEnv(app.env), sdk.WithFailureFunction(fails.fn)))
	env.mustPutApp(t, "ai", fmt.Sprintf(`{"workflows": [{"name": "chat", "url": %q, "triggers": [{"event": "go"}], "retries": 3,
		"cap": {"maxTokens": 1000}}]}`, url))
	runID := env.sendEvents(t, `{"name": "go", "data": {}}`)[0].Runs[0].RunID

	env.eventuallyRunStatus(t, runID, "failed")
	fails.sig.Wait(t, waitTimeout, 1, nil)
	require.Equal(t, 2, llm.Count(), "two calls reached the provider")
	run := env.aiRun(t, runID)
	require.Equal(t, int64(800), run.Usage.Tokens, "the run stayed under its cap")
	fails.mu.Lock()
	defer fails.mu.Unlock()
	var be *sdk.BudgetError
	require.ErrorAs(t, fails.seen[0].Err, &be)
	require.Equal(t, "budget_exceeded", be.Code)
	require.Equal(t, int64(800), be.Spent.Tokens)
	require.Greater(t, be.Projected.InputTokens, int64(300), "the projection counts the input: %+v", be.Projected)
	require.Equal(t, int64(100), be.Projected.OutputTokens)
}

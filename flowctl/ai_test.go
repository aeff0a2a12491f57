package flowctl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIsAIPath(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{
		"/v1/chat/completions": true, "/v1/completions": true, "/v1/responses": true, "/v1/messages": true,
		"/v1/embeddings": true, "/openai/deployments/x/chat/completions/": true, "/v1/models": false,
		"/v1/chat/completions/other": false, "/messages-archive": false, "": false,
	} {
		require.Equal(t, want, IsAIPath(path), path)
	}
}

func TestParseAIUsageShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body     string
		want     AIUsage
		reported bool
		ok       bool
	}{
		{`{"model":"gpt","usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, AIUsage{Model: "gpt", InputTokens: 10, OutputTokens: 5, Tokens: 15}, false, true},
		{`{"model":"claude","usage":{"input_tokens":7,"output_tokens":3}}`, AIUsage{Model: "claude", InputTokens: 7, OutputTokens: 3, Tokens: 10}, false, true},
		{`{"usage":{"prompt_tokens":4,"total_tokens":4}}`, AIUsage{InputTokens: 4, Tokens: 4}, false, true},
		{`{"usage":{"total_tokens":9}}`, AIUsage{InputTokens: 9, Tokens: 9}, false, true},
		{`{"usage":{"prompt_tokens":1,"completion_tokens":1,"cost":0.25}}`, AIUsage{InputTokens: 1, OutputTokens: 1, Tokens: 2, Cost: 0.25}, true, true},
		{`{"usage":{"prompt_tokens":1,"cost":-1}}`, AIUsage{InputTokens: 1, Tokens: 1}, false, true},
		{`{"choices":[]}`, AIUsage{}, false, false},
		{`not json`, AIUsage{}, false, false},
	}
	for _, c := range cases {
		u, reported, ok := ParseAIUsage([]byte(c.body))
		require.Equal(t, c.ok, ok, c.body)
		require.Equal(t, c.reported, reported, c.body)
		require.Equal(t, c.want, u, c.body)
	}
}

func TestParseAIRequest(t *testing.T) {
	t.Parallel()
	// The input estimate is the body's bytes / 3, rounded up.
	require.Equal(t, AIRequest{Model: "m", MaxTokens: 100, InputTokens: 10}, ParseAIRequest([]byte(`{"model":"m","max_tokens":100}`)))
	require.Equal(t, AIRequest{Model: "m", MaxTokens: 300, InputTokens: 14}, ParseAIRequest([]byte(`{"model":"m","max_completion_tokens":300}`)))
	require.Equal(t, AIRequest{Model: "m", MaxTokens: 50, InputTokens: 12}, ParseAIRequest([]byte(`{"model":"m","max_output_tokens":50}`)))
	require.Equal(t, AIRequest{Model: "m", InputTokens: 5}, ParseAIRequest([]byte(`{"model":"m"}`)))
	require.Equal(t, AIRequest{}, ParseAIRequest([]byte(`[`)))
	require.Equal(t, int64(0), EstimateInputTokens(0))
	require.Equal(t, int64(1), EstimateInputTokens(1))
	require.Equal(t, int64(1), EstimateInputTokens(3))
	require.Equal(t, int64(2), EstimateInputTokens(4))
}

func TestParseAIPrices(t *testing.T) {
	t.Parallel()
	p, err := ParseAIPrices([]byte(`{"models": {"gpt-4o-mini": {"input": 0.15, "output": 0.60}, "free": {"input": 0, "output": 0}}}`))
	require.NoError(t, err)
	cost, ok := p.Cost("gpt-4o-mini", 1_000_000, 2_000_000)
	require.True(t, ok)
	require.InDelta(t, 0.15+1.2, cost, 1e-12)
	_, ok = p.Cost("gpt-4o", 1, 1)
	require.False(t, ok, "names match exactly")

	for body, want := range map[string]string{
		`{"models": {"m": {"input": -1, "output": 1}}}`: "models.m.input",
		`{"models": {"m": {"input": 1, "outputs": 1}}}`: "unknown field",
		`{"model": {}}`: "unknown field",
		`{}`:            `"models" is missing`,
		`{"models": {"": {"input": 1, "output": 1}}}`:          "model name",
		`{"models": {"m": {"input": "1", "output": 1}}}`:       "USD per million tokens",
		`{"models": {}} {}`:                                    "trailing data",
		`{"models": {"m": {"input": 1e400, "output": 1}}}`:     "USD per million tokens",
		`{"models": {"` + strings.Repeat("x", 300) + `": {}}}`: "model name",
	} {
		_, err := ParseAIPrices([]byte(body))
		require.ErrorContains(t, err, want, body)
	}
	_, err = ParseAIPrices(make([]byte, MaxPriceFileSize+1))
	require.ErrorContains(t, err, "the limit is")
}

func TestCheckCap(t *testing.T) {
	t.Parallel()
	prices, err := ParseAIPrices([]byte(`{"models": {"m": {"input": 10, "output": 20}}}`))
	require.NoError(t, err)
	tokens := func(n int64) *Cap { return &Cap{MaxTokens: &n} }
	cost := func(v float64) *Cap { return &Cap{MaxCost: &v} }

	require.Nil(t, CheckCap(nil, AIUsage{Tokens: 1 << 40}, AIRequest{}, nil), "no cap, no check")
	require.Nil(t, CheckCap(tokens(1000), AIUsage{Tokens: 800}, AIRequest{MaxTokens: 200}, nil), "reaching the cap exactly is allowed")
	e := CheckCap(tokens(1000), AIUsage{Tokens: 800}, AIRequest{MaxTokens: 201}, nil)
	require.Equal(t, CodeBudgetExceeded, e.Code, "would cross")
	e = CheckCap(tokens(1000), AIUsage{Tokens: 1000}, AIRequest{}, nil)
	require.Equal(t, CodeBudgetExceeded, e.Code, "already reached")
	require.Contains(t, e.Error(), "budget_exceeded: the run has spent 1000 tokens")
	// The input counts too: 800 spent + 150 input + 100 output crosses 1000.
	require.Nil(t, CheckCap(tokens(1000), AIUsage{Tokens: 800}, AIRequest{MaxTokens: 100, InputTokens: 100}, nil))
	e = CheckCap(tokens(1000), AIUsage{Tokens: 800}, AIRequest{MaxTokens: 100, InputTokens: 150}, nil)
	require.Equal(t, CodeBudgetExceeded, e.Code, "input tokens are projected")
	require.Equal(t, AIUsage{InputTokens: 150, OutputTokens: 100, Tokens: 250}, e.Projected)
	require.Contains(t, e.Error(), "the call may add 250 (about 150 input, at most 100 output)")
	// maxCost prices the input estimate at the input price (10 USD per million).
	e = CheckCap(cost(1), AIUsage{Cost: 0.8}, AIRequest{Model: "m", MaxTokens: 10_000, InputTokens: 1}, prices)
	require.Equal(t, CodeBudgetExceeded, e.Code)
	require.InDelta(t, 0.20001, e.Projected.Cost, 1e-12)

	// maxCost: max tokens priced as output (20 USD per million): 10,000 tokens = 0.2 USD.
	require.Nil(t, CheckCap(cost(1), AIUsage{Cost: 0.8}, AIRequest{Model: "m", MaxTokens: 10_000}, prices))
	e = CheckCap(cost(1), AIUsage{Cost: 0.8}, AIRequest{Model: "m", MaxTokens: 10_001}, prices)
	require.Equal(t, CodeBudgetExceeded, e.Code)
	require.InDelta(t, 0.20002, e.Projected.Cost, 1e-12)
	e = CheckCap(cost(1), AIUsage{Cost: 1}, AIRequest{Model: "m"}, prices)
	require.Equal(t, CodeBudgetExceeded, e.Code)
	e = CheckCap(cost(1), AIUsage{}, AIRequest{Model: "other"}, prices)
	require.Equal(t, CodeNoPrice, e.Code, "a maxCost with an unpriced model is refused, not ignored")
	require.Contains(t, e.Error(), `"other"`)
	require.Nil(t, CheckCap(tokens(10), AIUsage{}, AIRequest{Model: "other"}, nil), "maxTokens needs no price")
}

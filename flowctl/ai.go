package flowctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// AI steps (docs/protocol.md, "AI steps and spend controls"): which calls are metered, what
// they spend, what they cost and whether a run's cap lets the next one start. Pure: bodies in,
// values out.

// AIPathSuffixes are the URL path endings that make a workflow call an AI step.
var AIPathSuffixes = []string{"/chat/completions", "/completions", "/responses", "/messages", "/embeddings"}

// IsAIPath reports whether a call to a URL with this path is an AI step.
func IsAIPath(path string) bool {
	path = strings.TrimRight(path, "/")
	for _, s := range AIPathSuffixes {
		if strings.HasSuffix(path, s) {
			return true
		}
	}
	return false
}

// AIUsage is what AI steps spent: per step (Model set) or summed over a run.
type AIUsage struct {
	Model        string  `json:"model,omitempty"`
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	Tokens       int64   `json:"tokens"`
	Cost         float64 `json:"cost"`
	// StepID is the workflow step the usage belongs to (0 when unknown); per step only.
	StepID int `json:"stepId,omitempty"`
}

// Add sums o into u (model and step are kept).
func (u *AIUsage) Add(o AIUsage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.Tokens += o.Tokens
	u.Cost += o.Cost
}

// AIRequest is what Duraton reads of an AI call's request body.
type AIRequest struct {
	Model string
	// MaxTokens is the most the call may produce (max_tokens, max_completion_tokens or
	// max_output_tokens); 0 when the request names no bound.
	MaxTokens int64
	// InputTokens is an upper estimate of the call's input tokens (EstimateInputTokens).
	InputTokens int64
}

// BytesPerInputToken is the request bytes EstimateInputTokens counts as one token. No
// tokenizer is known for an arbitrary model, so the estimate is conservative: byte-level
// BPE tokenizers (OpenAI, Anthropic, Llama) average about 4 bytes of English per token
// and rarely under 3 for other text and code, and the whole body (JSON syntax, roles,
// parameters) is counted, not only the messages.
const BytesPerInputToken = 3

// EstimateInputTokens is an upper estimate of the input tokens of a request body of n
// bytes: n / BytesPerInputToken, rounded up.
func EstimateInputTokens(n int) int64 {
	return (int64(n) + BytesPerInputToken - 1) / BytesPerInputToken
}

// ParseAIRequest reads the model and output bound of an OpenAI- or Anthropic-shaped
// request body, and estimates its input tokens from its size. A body that is not a JSON
// object gives the zero request.
func ParseAIRequest(body []byte) AIRequest {
	var r struct {
		Model     string `json:"model"`
		Max       *int64 `json:"max_tokens"`
		MaxCompl  *int64 `json:"max_completion_tokens"`
		MaxOutput *int64 `json:"max_output_tokens"`
	}
	if json.Unmarshal(body, &r) != nil {
		return AIRequest{}
	}
	out := AIRequest{Model: r.Model, InputTokens: EstimateInputTokens(len(body))}
	for _, p := range []*int64{r.Max, r.MaxCompl, r.MaxOutput} {
		if p != nil && *p > out.MaxTokens {
			out.MaxTokens = *p
		}
	}
	return out
}

// ParseAIUsage reads the usage of a provider's answer: usage.prompt_tokens /
// completion_tokens (OpenAI chat), input_tokens / output_tokens (Anthropic, OpenAI
// responses), or total_tokens alone (embeddings); usage.cost when the provider reports
// one (reported true). ok is false when the answer carries no usage.
func ParseAIUsage(body []byte) (u AIUsage, reported bool, ok bool) {
	var a struct {
		Model string `json:"model"`
		Usage *struct {
			Prompt     *int64   `json:"prompt_tokens"`
			Completion *int64   `json:"completion_tokens"`
			Input      *int64   `json:"input_tokens"`
			Output     *int64   `json:"output_tokens"`
			Total      *int64   `json:"total_tokens"`
			Cost       *float64 `json:"cost"`
		} `json:"usage"`
	}
	if json.Unmarshal(body, &a) != nil || a.Usage == nil {
		return AIUsage{}, false, false
	}
	us := a.Usage
	val := func(ps ...*int64) int64 {
		for _, p := range ps {
			if p != nil && *p > 0 {
				return *p
			}
		}
		return 0
	}
	u = AIUsage{Model: a.Model, InputTokens: val(us.Prompt, us.Input), OutputTokens: val(us.Completion, us.Output)}
	u.Tokens = u.InputTokens + u.OutputTokens
	if t := val(us.Total); t > u.Tokens {
		if u.Tokens == 0 {
			u.InputTokens = t // an embedding's tokens are all input
		}
		u.Tokens = t
	}
	if us.Cost != nil && *us.Cost >= 0 && !math.IsInf(*us.Cost, 0) && !math.IsNaN(*us.Cost) {
		u.Cost, reported = *us.Cost, true
	}
	return u, reported, true
}

// ModelPrice is one model's price in USD per million tokens.
type ModelPrice struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// AIPrices is the price table in force (the --ai-prices file).
type AIPrices struct {
	Models map[string]ModelPrice `json:"models"`
}

// Limits of a price file.
const (
	MaxPriceModels   = 10_000
	MaxModelNameLen  = 256
	MaxPriceFileSize = 4 << 20
)

// ParseAIPrices reads and validates a price file: {"models": {"<model>": {"input": USD,
// "output": USD}}}, prices per million tokens, finite and not negative. Unknown fields
// are refused, so a misspelt "inputs" is not read as a free model.
func ParseAIPrices(data []byte) (*AIPrices, error) {
	if len(data) > MaxPriceFileSize {
		return nil, fmt.Errorf("ai prices: the file is %d bytes, the limit is %d", len(data), MaxPriceFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p AIPrices
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("ai prices: want {\"models\": {\"<model>\": {\"input\": USD, \"output\": USD}}} (USD per million tokens): %w", err)
	}
	if dec.More() {
		return nil, errors.New("ai prices: trailing data after the JSON object")
	}
	if p.Models == nil {
		return nil, errors.New("ai prices: \"models\" is missing")
	}
	if len(p.Models) > MaxPriceModels {
		return nil, fmt.Errorf("ai prices: %d models, the limit is %d", len(p.Models), MaxPriceModels)
	}
	for name, mp := range p.Models {
		if name == "" || len(name) > MaxModelNameLen {
			return nil, fmt.Errorf("ai prices: model name %q must be 1-%d bytes", name, MaxModelNameLen)
		}
		for field, v := range map[string]float64{"input": mp.Input, "output": mp.Output} {
			if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("ai prices: models.%s.%s must be a finite USD amount ≥ 0, got %v", name, field, v)
			}
		}
	}
	return &p, nil
}

// Price returns a model's price; ok is false for a model the table does not name.
func (p *AIPrices) Price(model string) (ModelPrice, bool) {
	if p == nil {
		return ModelPrice{}, false
	}
	mp, ok := p.Models[model]
	return mp, ok
}

// Cost prices input and output tokens of model; ok is false when the model has no price.
func (p *AIPrices) Cost(model string, in, out int64) (float64, bool) {
	mp, ok := p.Price(model)
	if !ok {
		return 0, false
	}
	return (float64(in)*mp.Input + float64(out)*mp.Output) / 1e6, true
}

// Budget failure codes.
const (
	CodeBudgetExceeded = "budget_exceeded"
	CodeNoPrice        = "ai_price_unknown"
)

// BudgetError is an AI step the run's cap does not let start.
type BudgetError struct {
	Code string `json:"code"`
	Msg  string `json:"-"`
	// Spent is the run's recorded spend; Projected what the call could add.
	Spent     AIUsage `json:"spent"`
	Projected AIUsage `json:"projected"`
	Cap       Cap     `json:"cap"`
}

func (e *BudgetError) Error() string { return e.Code + ": " + e.Msg }

// CheckCap decides whether an AI step may start under cap (docs/protocol.md, "AI steps and
// spend controls"): it may not when the run's recorded spend already reached the cap, or when
// the spend plus what the call may add (its estimated input tokens and its max tokens, each
// priced as such) would cross it. A maxCost whose model has no price is refused rather than
// ignored (code ai_price_unknown).
func CheckCap(cp *Cap, spent AIUsage, req AIRequest, prices *AIPrices) *BudgetError {
	if cp == nil {
		return nil
	}
	proj := AIUsage{Model: req.Model, InputTokens: req.InputTokens, OutputTokens: req.MaxTokens, Tokens: req.InputTokens + req.MaxTokens}
	proj.Cost, _ = prices.Cost(req.Model, req.InputTokens, req.MaxTokens)
	fail := func(code, format string, args ...any) *BudgetError {
		return &BudgetError{Code: code, Msg: fmt.Sprintf(format, args...), Spent: spent, Projected: proj, Cap: *cp}
	}
	if m := cp.MaxTokens; m != nil {
		switch {
		case spent.Tokens >= *m:
			return fail(CodeBudgetExceeded, "the run has spent %d tokens, its cap is maxTokens %d", spent.Tokens, *m)
		case spent.Tokens+proj.Tokens > *m:
			return fail(CodeBudgetExceeded, "the run has spent %d tokens and the call may add %d (about %d input, at most %d output), its cap is maxTokens %d", spent.Tokens, proj.Tokens, proj.InputTokens, proj.OutputTokens, *m)
		}
	}
	if m := cp.MaxCost; m != nil {
		cost, ok := prices.Cost(req.Model, req.InputTokens, req.MaxTokens)
		if !ok {
			return fail(CodeNoPrice, "the run has a maxCost cap but model %q has no price in the AI price table", req.Model)
		}
		switch {
		case spent.Cost >= *m:
			return fail(CodeBudgetExceeded, "the run has spent %.6f USD, its cap is maxCost %.6f", spent.Cost, *m)
		case spent.Cost+cost > *m:
			return fail(CodeBudgetExceeded, "the run has spent %.6f USD and the call may add %.6f (its estimated input and max output tokens), its cap is maxCost %.6f", spent.Cost, cost, *m)
		}
	}
	return nil
}

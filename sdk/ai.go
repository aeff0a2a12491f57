package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/duraton/duraton/sdk/wire"
)

// AI steps: a call Duraton makes to an OpenAI-compatible chat-completions API, metered
// (tokens and cost recorded on the step and the run) and checked against the run's AI
// cap before it leaves. The call's publish carries the Duraton-Ai header, so it is an AI
// step whatever its URL.

// DefaultAIBaseURL is the API an AIRequest without BaseURL calls.
const DefaultAIBaseURL = "https://api.openai.com/v1"

// AIRequest is one chat-completions call.
type AIRequest struct {
	// BaseURL is the API's base; the call goes to BaseURL + "/chat/completions".
	// Default DefaultAIBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>" with the call only; Duraton
	// hides it from logs, dead letters and run views.
	APIKey string
	// Header adds headers to the call.
	Header http.Header
	// Retries and Timeout are the call's own (as for Call).
	Retries int
	Timeout time.Duration
	// Chat is the request body.
	Chat ChatRequest
}

// ChatRequest is the body of a chat-completions request.
type ChatRequest struct {
	Model       string        `json:"model"`
	Messages    []ChatMessage `json:"messages"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
}

// ChatMessage is one message of a chat.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatCompletion is the API's answer.
type ChatCompletion struct {
	ID      string       `json:"id"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   ChatUsage    `json:"usage"`
}

// ChatChoice is one choice of an answer.
type ChatChoice struct {
	Index        int         `json:"index"`
	Message      ChatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
}

// ChatUsage is what the call spent, as the provider reports it.
type ChatUsage struct {
	PromptTokens     int64    `json:"prompt_tokens"`
	CompletionTokens int64    `json:"completion_tokens"`
	TotalTokens      int64    `json:"total_tokens"`
	Cost             *float64 `json:"cost,omitempty"`
}

// Text is the first choice's content ("" when there is none).
func (c ChatCompletion) Text() string {
	if len(c.Choices) == 0 {
		return ""
	}
	return c.Choices[0].Message.Content
}

// AIError is a non-2xx answer of the AI API, or no answer at all: Status 0 means the
// call never got one (the provider could not be reached or timed out, and its retries
// are spent), with Duraton's description of the failure in Body.
type AIError struct {
	Status int
	Body   []byte
}

func (e *AIError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("sdk: AI call got no answer: %s", strings.TrimSpace(string(e.Body)))
	}
	return fmt.Sprintf("sdk: AI call answered %d: %s", e.Status, strings.TrimSpace(string(e.Body)))
}

// AI has Duraton call a chat-completions API as the step name and returns the typed
// answer. Duraton meters it and checks the run's AI cap first: a call the cap does not
// let start fails the run (the failure function gets a *BudgetError as
// FailureContext.Err). A non-2xx answer, or none (an unreachable provider), is an
// *AIError.
func AI(c *Context, name string, req AIRequest) (ChatCompletion, error) {
	body, err := json.Marshal(req.Chat)
	if err != nil {
		return ChatCompletion{}, fmt.Errorf("step %q: encode chat request: %w", name, err)
	}
	base := req.BaseURL
	if base == "" {
		base = DefaultAIBaseURL
	}
	header := http.Header{}
	for k, vs := range req.Header {
		header[k] = vs
	}
	header.Set("Content-Type", "application/json")
	if req.APIKey != "" {
		header.Set("Authorization", "Bearer "+req.APIKey)
	}
	res, err := c.call(name, CallRequest{
		URL: strings.TrimRight(base, "/") + "/chat/completions", Method: http.MethodPost, Body: body,
		Header: header, Retries: req.Retries, Timeout: req.Timeout,
	}, map[string]string{wire.HeaderAI: "openai"})
	if err != nil {
		return ChatCompletion{}, err
	}
	// c.call returns only a recorded result (scheduling the call ends the delivery), so
	// status 0 is a call that got no answer, never one still to come.
	if res.Status < 200 || res.Status > 299 {
		return ChatCompletion{}, &AIError{Status: res.Status, Body: res.Body}
	}
	var out ChatCompletion
	if err := json.Unmarshal(res.Body, &out); err != nil {
		return ChatCompletion{}, fmt.Errorf("step %q: decode chat completion: %w", name, err)
	}
	return out, nil
}

// ErrBudget is what every *BudgetError matches with errors.Is.
var ErrBudget = errors.New("sdk: AI budget exceeded")

// BudgetError is a run stopped by its AI cap: the AI step that would have crossed it did
// not start. Code is "budget_exceeded" (or "ai_price_unknown": a maxCost cap and a model
// without a price).
type BudgetError struct {
	Code    string
	Message string
	// Spent is the run's spend when the step was stopped, Projected what the call could
	// have added; MaxCost / MaxTokens the cap (nil: not set).
	Spent, Projected AIUsage
	MaxCost          *float64
	MaxTokens        *int64
}

// AIUsage is tokens and USD cost.
type AIUsage struct {
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	Tokens       int64   `json:"tokens"`
	Cost         float64 `json:"cost"`
}

func (e *BudgetError) Error() string { return "sdk: " + e.Message }

// Is makes errors.Is(err, ErrBudget) true.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

// budgetErrorOf reads the failure a failure function receives: status 402 with the
// JSON body {"error", "code", "spent", "projected", "cap"} is a *BudgetError.
func budgetErrorOf(status int, body []byte) error {
	if status != http.StatusPaymentRequired {
		return nil
	}
	var b struct {
		Error     string  `json:"error"`
		Code      string  `json:"code"`
		Spent     AIUsage `json:"spent"`
		Projected AIUsage `json:"projected"`
		Cap       struct {
			MaxCost   *float64 `json:"maxCost"`
			MaxTokens *int64   `json:"maxTokens"`
		} `json:"cap"`
	}
	if json.Unmarshal(body, &b) != nil || (b.Code != "budget_exceeded" && b.Code != "ai_price_unknown") {
		return nil
	}
	return &BudgetError{Code: b.Code, Message: b.Error, Spent: b.Spent, Projected: b.Projected, MaxCost: b.Cap.MaxCost, MaxTokens: b.Cap.MaxTokens}
}

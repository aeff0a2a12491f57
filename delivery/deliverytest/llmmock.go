package deliverytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// LLMUsage is what the mock LLM reports for each answer: input and output tokens, and a
// provider cost (usage.cost) when Cost is set.
type LLMUsage struct {
	Input, Output int64
	Cost          *float64
}

// LLMCall is one request the mock LLM answered.
type LLMCall struct {
	Path          string
	Model         string
	Authorization string // the Authorization (or x-api-key) header as received
	Body          []byte
}

// LLM is a mock OpenAI- and Anthropic-compatible API on loopback: POST .../responses
// and .../embeddings answer in OpenAI's shapes, .../messages in Anthropic's, any other
// path (.../chat/completions, .../completions, a proxy's own route) as an OpenAI chat
// completion, each with the configured usage. It counts and records every call; Calls
// is a Signal tests wait on.
type LLM struct {
	srv   *httptest.Server
	Calls Signal[LLMCall]

	mu    sync.Mutex
	usage LLMUsage
}

// NewLLM starts a mock LLM answering with usage; it stops when the test ends.
func NewLLM(t TB, usage LLMUsage) *LLM {
	t.Helper()
	l := &LLM{usage: usage}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.srv.Close)
	return l
}

// URL is the mock's base URL (e.g. URL()+"/v1/chat/completions").
func (l *LLM) URL() string { return l.srv.URL }

// SetUsage changes the usage of later answers.
func (l *LLM) SetUsage(u LLMUsage) {
	l.mu.Lock()
	l.usage = u
	l.mu.Unlock()
}

// Count is the number of calls answered so far.
func (l *LLM) Count() int { return len(l.Calls.All()) }

func (l *LLM) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"want a POST with a JSON body"}}`, http.StatusBadRequest)
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
		http.Error(w, `{"error":{"message":"want a JSON body with a model"}}`, http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	u := l.usage
	l.mu.Unlock()
	auth := r.Header.Get("Authorization")
	if auth == "" {
		auth = r.Header.Get("X-Api-Key")
	}
	n := l.Count() + 1
	text := fmt.Sprintf("mock answer %d", n)
	path := strings.TrimRight(r.URL.Path, "/")
	var answer map[string]any
	switch {
	case strings.HasSuffix(path, "/messages"):
		usage := map[string]any{"input_tokens": u.Input, "output_tokens": u.Output}
		addCost(usage, u)
		answer = map[string]any{"id": fmt.Sprintf("msg_mock_%d", n), "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{map[string]any{"type": "text", "text": text}}, "stop_reason": "end_turn", "usage": usage}
	case strings.HasSuffix(path, "/responses"):
		usage := map[string]any{"input_tokens": u.Input, "output_tokens": u.Output, "total_tokens": u.Input + u.Output}
		addCost(usage, u)
		answer = map[string]any{"id": fmt.Sprintf("resp_mock_%d", n), "object": "response", "model": req.Model,
			"output": []any{map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": text}}}}, "usage": usage}
	case strings.HasSuffix(path, "/embeddings"):
		usage := map[string]any{"prompt_tokens": u.Input, "total_tokens": u.Input}
		addCost(usage, u)
		answer = map[string]any{"object": "list", "model": req.Model, "data": []any{map[string]any{"object": "embedding", "index": 0, "embedding": []float64{0.1, 0.2}}}, "usage": usage}
	default: // chat/completions, completions, and any other path (a proxy's route)
		usage := map[string]any{"prompt_tokens": u.Input, "completion_tokens": u.Output, "total_tokens": u.Input + u.Output}
		addCost(usage, u)
		answer = map[string]any{"id": fmt.Sprintf("chatcmpl-mock-%d", n), "object": "chat.completion", "created": 1700000000, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}}, "usage": usage}
	}
	l.Calls.Emit(LLMCall{Path: path, Model: req.Model, Authorization: auth, Body: body})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

func addCost(usage map[string]any, u LLMUsage) {
	if u.Cost != nil {
		usage["cost"] = *u.Cost
	}
}

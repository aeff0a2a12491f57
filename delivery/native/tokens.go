package native

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/duraton/duraton/storage"
)

// gateTokens names a workflow's tokenThrottle buckets (delivery/internal/aimeter keeps them).
const gateTokens = "tokenThrottle"

// TokenThrottleState is one tokenThrottle bucket (GET /flow-state: docs/protocol.md, "AI
// steps and spend controls"): its capacity, its level now (negative: in debt) and when
// the scope's next run may start. Key is the resolved key value ("" for the
// whole-workflow scope).
type TokenThrottleState struct {
	App         string  `json:"app"`
	Workflow    string  `json:"workflow"`
	Key         string  `json:"key"`
	Tokens      int64   `json:"tokens"`
	Level       float64 `json:"level"`
	NextStartAt string  `json:"nextStartAt"`
	// AvgRunTokens is the scope's average tokens per ended run: what a start reserves.
	AvgRunTokens int64 `json:"avgRunTokens"`
}

// tokenState reads one bucket record as of now.
func tokenState(d *Workflow, key string, st *storage.GateState, now time.Time) TokenThrottleState {
	tt := d.FlowControl.TokenThrottle
	g := storage.TokenGate{Tokens: tt.Tokens, PerMs: tt.PerMs}
	ahead := st.GCRA.TAT - now.UnixNano()
	level := float64(tt.Tokens)
	if ahead > 0 {
		level -= float64(ahead) / g.NsPerToken()
	}
	next := now
	if ahead >= g.Window() {
		next = time.Unix(0, st.GCRA.TAT-g.Window()+1)
	}
	b := storage.TokenBucket{Runs: st.Runs, RunTokens: st.RunTokens}
	return TokenThrottleState{App: d.App, Workflow: d.Name, Key: keyText(strings.TrimPrefix(key, gateKey(d.Name, gateTokens, ""))),
		Tokens: tt.Tokens, Level: level, NextStartAt: rfc3339(next), AvgRunTokens: b.Average()}
}

// keyText shows a resolved key value (a JSON scalar: "t1", 1, true) as text, a string
// unquoted, as expressions render values.
func keyText(value string) string {
	var s string
	if strings.HasPrefix(value, `"`) && json.Unmarshal([]byte(value), &s) == nil {
		return s
	}
	return value
}

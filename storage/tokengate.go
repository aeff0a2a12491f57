package storage

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/duraton/duraton/flowctl"
)

// TokenGate is a native workflow's tokenThrottle scope (docs/protocol.md, "Controls"): a bucket of
// Tokens AI tokens refilled at Tokens per PerMs. A run's first delivery waits in the
// scheduler while the bucket is at or below zero. Key names the bucket's stored state (a
// gate record: a GCRA whose TAT is when the bucket is full again).
//
// Estimate is the declared tokens per run a start reserves until the scope knows its
// average (0: none; such a scope starts one run at a time until then).
type TokenGate struct {
	Key      string `json:"key"`
	Tokens   int64  `json:"tokens"`
	PerMs    int64  `json:"perMs"`
	Estimate int64  `json:"estimate,omitempty"`
}

// NsPerToken is how long the bucket takes to refill one token, in nanoseconds.
func (g *TokenGate) NsPerToken() float64 {
	return float64(time.Duration(g.PerMs)*time.Millisecond) / float64(g.Tokens)
}

// Window is the bucket's full refill time: it is above zero while TAT − now < Window.
func (g *TokenGate) Window() int64 { return int64(time.Duration(g.PerMs) * time.Millisecond) }

// Debit is the TAT shift of n tokens (negative n: a credit).
func (g *TokenGate) Debit(n int64) int64 { return int64(float64(n) * g.NsPerToken()) }

func (g *TokenGate) fields() []string {
	f := []string{base64.RawURLEncoding.EncodeToString([]byte(g.Key)), strconv.FormatInt(g.Tokens, 10), strconv.FormatInt(g.PerMs, 10), "t"}
	if g.Estimate > 0 {
		f = append(f, strconv.FormatInt(g.Estimate, 10)) // after the marker: entries without it still decode
	}
	return f
}

func decodeTokenGate(f [][]byte) (*TokenGate, error) {
	key, err := base64.RawURLEncoding.DecodeString(string(f[0]))
	if err != nil || string(f[3]) != "t" {
		return nil, ErrCorrupt
	}
	g := &TokenGate{Key: string(key)}
	g.Tokens, _ = strconv.ParseInt(string(f[1]), 10, 64)
	g.PerMs, _ = strconv.ParseInt(string(f[2]), 10, 64)
	if g.Tokens < 1 || g.PerMs < 1 {
		return nil, ErrCorrupt
	}
	return g, nil
}

// tokenStatsKeep is how long a token scope's run statistics are kept after its last run
// ended (they give the average a start reserves).
const tokenStatsKeep = 30 * 24 * time.Hour

// TokenBucket is the stored state of one tokenThrottle scope: its GCRA (TAT: when the
// bucket is full again) in the gate record, with the scope's ended runs and their tokens.
type TokenBucket struct {
	TAT       int64 // unix ns
	Runs      int64
	RunTokens int64
}

// Average is the scope's average tokens per ended run (0 before the first).
func (b TokenBucket) Average() int64 {
	if b.Runs == 0 {
		return 0
	}
	return b.RunTokens / b.Runs
}

// TokenBucket reads a tokenThrottle scope's state (zero when it has none).
func (t *Tx) TokenBucket(project, key string) (TokenBucket, error) {
	st, err := t.Gate(project, key)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return TokenBucket{}, nil
		}
		return TokenBucket{}, err
	}
	return TokenBucket{TAT: st.GCRA.TAT, Runs: st.Runs, RunTokens: st.RunTokens}, nil
}

// PutTokenBucket stores a tokenThrottle scope's state; it is kept while the bucket is
// not full and for tokenStatsKeep after now.
func (t *Tx) PutTokenBucket(project, key string, b TokenBucket, now time.Time) error {
	exp := max(time.Unix(0, b.TAT).UnixMilli()+1, now.Add(tokenStatsKeep).UnixMilli())
	return t.PutGate(project, key, &GateState{ExpiresAt: exp, GCRA: flowctl.GCRA{TAT: b.TAT}, Runs: b.Runs, RunTokens: b.RunTokens})
}

// TokenAverages returns the average tokens per run of a project's tokenThrottle scopes
// that have ended runs, by gate key (restored into the scheduler at start-up).
func (t *Tx) TokenAverages(project string) (map[string]int64, error) {
	out := map[string]int64{}
	b := t.bucket(project, bucketGates)
	if b == nil {
		return out, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		var st GateState
		if err := json.Unmarshal(v, &st); err != nil {
			return fmt.Errorf("gate state %q: %w", k, err)
		}
		if st.Runs > 0 {
			out[string(k)] = st.RunTokens / st.Runs
		}
		return nil
	})
	return out, err
}

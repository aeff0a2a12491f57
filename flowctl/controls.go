package flowctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// The workflow-level controls of docs/protocol.md, "Controls", as declared on a native workflow
// definition. Times are milliseconds, as on the wire.

// Concurrency limits a workflow's deliveries holding a slot at once, per key value.
// Scope "app" shares the limit with every workflow of the app that declares the same
// key text and limit with scope "app"; "" (or "workflow") is the workflow's own.
type Concurrency struct {
	Limit int    `json:"limit"`
	Key   string `json:"key,omitempty"`
	Scope string `json:"scope,omitempty"`
}

// Concurrency scopes.
const (
	ScopeWorkflow = "workflow"
	ScopeApp      = "app"
)

// GCRALimit is throttle and rateLimit: limit per perMs. Burst (throttle only) is how
// many starts may go at once from idle: 1 to limit, 0 meaning limit.
type GCRALimit struct {
	Limit int    `json:"limit"`
	PerMs int64  `json:"perMs"`
	Key   string `json:"key,omitempty"`
	Burst int    `json:"burst,omitempty"`
}

// BurstOrLimit is the burst in force: Burst, or Limit when it is not set.
func (g *GCRALimit) BurstOrLimit() int {
	if g.Burst > 0 {
		return g.Burst
	}
	return g.Limit
}

// Debounce coalesces a burst into one run periodMs after its last event (at the latest
// timeoutMs after its first).
type Debounce struct {
	PeriodMs  int64  `json:"periodMs"`
	Key       string `json:"key,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// Batch collects events into one run of maxSize events or timeoutMs after the first.
type Batch struct {
	MaxSize   int    `json:"maxSize"`
	TimeoutMs int64  `json:"timeoutMs"`
	Key       string `json:"key,omitempty"`
}

// Priority orders a workflow's deliveries as if enqueued shiftMs earlier; or, with Run, a
// CEL expression over the event, as if enqueued that many seconds earlier (an int clamped
// to ±MaxPriorityRunS), per run.
type Priority struct {
	ShiftMs int64  `json:"shiftMs"`
	Run     string `json:"run,omitempty"`
}

// Singleton keeps at most one non-terminal run per key.
type Singleton struct {
	Key  string `json:"key,omitempty"`
	Mode string `json:"mode"`
}

// Idempotency starts one run per key value per periodMs window.
type Idempotency struct {
	Key      string `json:"key,omitempty"`
	PeriodMs int64  `json:"periodMs"`
}

// Cap bounds a run's AI spend, checked before each AI step (ai.go CheckCap).
type Cap struct {
	MaxCost   *float64 `json:"maxCost,omitempty"`
	MaxTokens *int64   `json:"maxTokens,omitempty"`
}

// TokenThrottle limits AI tokens per scope: a token bucket that delays run starts.
// Estimate (1 to Tokens) is the tokens a run is assumed to spend until the scope has
// seen runs end; without it the scope starts one run at a time until then.
type TokenThrottle struct {
	Tokens   int64  `json:"tokens"`
	PerMs    int64  `json:"perMs"`
	Key      string `json:"key,omitempty"`
	Estimate int64  `json:"estimate,omitempty"`
}

// Controls are a workflow's flat controls; a nil field is off.
type Controls struct {
	Concurrency   []Concurrency  `json:"concurrency,omitempty"`
	Throttle      *GCRALimit     `json:"throttle,omitempty"`
	RateLimit     *GCRALimit     `json:"rateLimit,omitempty"`
	Debounce      *Debounce      `json:"debounce,omitempty"`
	Batch         *Batch         `json:"batch,omitempty"`
	Priority      *Priority      `json:"priority,omitempty"`
	Singleton     *Singleton     `json:"singleton,omitempty"`
	Idempotency   *Idempotency   `json:"idempotency,omitempty"`
	Cap           *Cap           `json:"cap,omitempty"`
	TokenThrottle *TokenThrottle `json:"tokenThrottle,omitempty"`
}

// Limits of the controls (docs/protocol.md, "Controls").
const (
	MaxConcurrencyLimit   = 100_000
	MaxConcurrencies      = 2
	MaxKeyPathLen         = 256
	MaxKeyExprLen         = 1024
	MaxPriorityRunS       = 600
	MaxBatchSize          = 1_000
	DefaultIdempotencyMs  = 24 * 60 * 60 * 1000
	SingletonCancel       = "cancel"
	SingletonSkip         = "skip"
	msSecond              = int64(time.Second / time.Millisecond)
	msHour                = 60 * 60 * msSecond
	msDay                 = 24 * msHour
	maxThrottlePerMs      = 7 * msDay
	maxRateLimitPerMs     = msDay
	maxDebouncePeriodMs   = 7 * msDay
	maxBatchTimeoutMs     = msHour
	maxPriorityShiftMs    = 12 * msHour
	maxIdempotencyMs      = 30 * msDay
	maxTokenThrottlePerMs = msDay
)

// FieldError is a control that cannot be accepted: Field is its path in the definition
// (e.g. "concurrency[1].limit").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ControlNames are the definition fields ParseControls reads.
var ControlNames = []string{"concurrency", "throttle", "rateLimit", "debounce", "batch", "priority",
	"singleton", "idempotency", "cap", "tokenThrottle"}

// ParseControls reads the controls among a definition's fields (other fields are left to
// the caller), strictly: an unknown field, a value of the wrong type, a value out of range,
// a malformed key path or a combination that cannot mean anything is a *FieldError naming
// the field. Defaults are filled in (idempotency periodMs, singleton mode).
func ParseControls(fields map[string]json.RawMessage) (Controls, error) {
	var c Controls
	if raw, ok := fields["concurrency"]; ok {
		var err error
		if c.Concurrency, err = parseConcurrency(raw); err != nil {
			return Controls{}, err
		}
	}
	steps := []struct {
		name string
		dst  any
		keys []string
	}{
		{"throttle", &c.Throttle, []string{"limit", "perMs", "key", "burst"}},
		{"rateLimit", &c.RateLimit, []string{"limit", "perMs", "key"}},
		{"debounce", &c.Debounce, []string{"periodMs", "key", "timeoutMs"}},
		{"batch", &c.Batch, []string{"maxSize", "timeoutMs", "key"}},
		{"priority", &c.Priority, []string{"shiftMs", "run"}},
		{"singleton", &c.Singleton, []string{"key", "mode"}},
		{"idempotency", &c.Idempotency, []string{"key", "periodMs"}},
		{"cap", &c.Cap, []string{"maxCost", "maxTokens"}},
		{"tokenThrottle", &c.TokenThrottle, []string{"tokens", "perMs", "key", "estimate"}},
	}
	for _, s := range steps {
		raw, ok := fields[s.name]
		if !ok {
			continue
		}
		if err := DecodeStrict(s.name, raw, s.keys, s.dst); err != nil {
			return Controls{}, err
		}
	}
	if raw, ok := fields["tokenThrottle"]; ok && c.TokenThrottle != nil && c.TokenThrottle.Estimate == 0 && hasField(raw, "estimate") {
		return Controls{}, fieldErr("tokenThrottle.estimate", "must be between 1 and tokens (%d), got 0 (leave it out to start one run at a time until an average is known)", c.TokenThrottle.Tokens)
	}
	if raw, ok := fields["throttle"]; ok && c.Throttle != nil && c.Throttle.Burst == 0 && hasField(raw, "burst") {
		return Controls{}, fieldErr("throttle.burst", "must be between 1 and limit (%d), got 0 (leave it out for burst = limit)", c.Throttle.Limit)
	}
	if err := c.Validate(); err != nil {
		return Controls{}, err
	}
	return c, nil
}

// hasField reports whether the JSON object raw has the field name.
func hasField(raw json.RawMessage, name string) bool {
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(raw, &obj)
	_, ok := obj[name]
	return ok
}

func parseConcurrency(raw json.RawMessage) ([]Concurrency, error) {
	keys := []string{"limit", "key", "scope"}
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(t, &items); err != nil {
			return nil, fieldErr("concurrency", "want an object or an array of at most %d objects: %v", MaxConcurrencies, err)
		}
		if len(items) == 0 || len(items) > MaxConcurrencies {
			return nil, fieldErr("concurrency", "want 1 to %d constraints, got %d", MaxConcurrencies, len(items))
		}
		out := make([]Concurrency, len(items))
		for i, it := range items {
			if err := DecodeStrict(fmt.Sprintf("concurrency[%d]", i), it, keys, &out[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	var one Concurrency
	if err := DecodeStrict("concurrency", raw, keys, &one); err != nil {
		return nil, err
	}
	return []Concurrency{one}, nil
}

// DecodeStrict decodes the JSON object raw into dst (a pointer, or a pointer to a
// pointer that it allocates), refusing null, non-objects, fields not in allowed and
// values of the wrong type, each as a *FieldError under field.
func DecodeStrict(field string, raw json.RawMessage, allowed []string, dst any) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return fieldErr(field, "want a JSON object")
	}
	var unknown []string
	for k := range obj {
		if !contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fieldErr(field+"."+unknown[0], "unknown field (known: %s)", strings.Join(allowed, ", "))
	}
	for k, v := range obj {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return fieldErr(field+"."+k, "must not be null")
		}
		if k == "key" && bytes.Equal(bytes.TrimSpace(v), []byte(`""`)) {
			return fieldErr(field+".key", "must not be empty (leave it out for the whole-workflow scope)")
		}
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fieldErr(field+"."+te.Field, "want a %s, got a JSON %s", te.Type, te.Value)
		}
		return fieldErr(field, "%v", err)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Validate checks ranges, key paths and combinations, filling in defaults.
func (c *Controls) Validate() error {
	for i, cc := range c.Concurrency {
		f := "concurrency"
		if len(c.Concurrency) > 1 {
			f = fmt.Sprintf("concurrency[%d]", i)
		}
		if cc.Limit < 1 || cc.Limit > MaxConcurrencyLimit {
			return fieldErr(f+".limit", "must be between 1 and %d, got %d", MaxConcurrencyLimit, cc.Limit)
		}
		if err := checkKey(f, cc.Key); err != nil {
			return err
		}
		if cc.Scope != "" && cc.Scope != ScopeWorkflow && cc.Scope != ScopeApp {
			return fieldErr(f+".scope", "must be %q (default) or %q, got %q", ScopeWorkflow, ScopeApp, cc.Scope)
		}
	}
	if len(c.Concurrency) == 2 && c.Concurrency[0].Key == c.Concurrency[1].Key {
		return fieldErr("concurrency[1].key", "two concurrency constraints need different keys, both are %q", c.Concurrency[0].Key)
	}
	if err := checkGCRA("throttle", c.Throttle, maxThrottlePerMs); err != nil {
		return err
	}
	if g := c.Throttle; g != nil && (g.Burst < 0 || g.Burst > g.Limit) {
		return fieldErr("throttle.burst", "must be between 1 and limit (%d), got %d", g.Limit, g.Burst)
	}
	if err := checkGCRA("rateLimit", c.RateLimit, maxRateLimitPerMs); err != nil {
		return err
	}
	if d := c.Debounce; d != nil {
		if err := inRange("debounce.periodMs", d.PeriodMs, msSecond, maxDebouncePeriodMs); err != nil {
			return err
		}
		if d.TimeoutMs != 0 && d.TimeoutMs < d.PeriodMs {
			return fieldErr("debounce.timeoutMs", "must be at least periodMs (%d), got %d", d.PeriodMs, d.TimeoutMs)
		}
		if err := checkKey("debounce", d.Key); err != nil {
			return err
		}
	}
	if b := c.Batch; b != nil {
		if b.MaxSize < 2 || b.MaxSize > MaxBatchSize {
			return fieldErr("batch.maxSize", "must be between 2 and %d, got %d", MaxBatchSize, b.MaxSize)
		}
		if err := inRange("batch.timeoutMs", b.TimeoutMs, msSecond, maxBatchTimeoutMs); err != nil {
			return err
		}
		if err := checkKey("batch", b.Key); err != nil {
			return err
		}
	}
	if p := c.Priority; p != nil && (p.ShiftMs < -maxPriorityShiftMs || p.ShiftMs > maxPriorityShiftMs) {
		return fieldErr("priority.shiftMs", "must be between %d and %d (±12 h), got %d", -maxPriorityShiftMs, maxPriorityShiftMs, p.ShiftMs)
	}
	if p := c.Priority; p != nil && p.Run != "" {
		if p.ShiftMs != 0 {
			return fieldErr("priority.run", "give shiftMs or run, not both")
		}
		if len(p.Run) > MaxKeyExprLen {
			return fieldErr("priority.run", "the expression is %d bytes, the limit is %d", len(p.Run), MaxKeyExprLen)
		}
	}
	if s := c.Singleton; s != nil {
		switch s.Mode {
		case "":
			s.Mode = SingletonCancel
		case SingletonCancel, SingletonSkip:
		default:
			return fieldErr("singleton.mode", "must be %q or %q, got %q", SingletonCancel, SingletonSkip, s.Mode)
		}
		if err := checkKey("singleton", s.Key); err != nil {
			return err
		}
	}
	if i := c.Idempotency; i != nil {
		if i.PeriodMs == 0 {
			i.PeriodMs = DefaultIdempotencyMs
		}
		if err := inRange("idempotency.periodMs", i.PeriodMs, msSecond, maxIdempotencyMs); err != nil {
			return err
		}
		if err := checkKey("idempotency", i.Key); err != nil {
			return err
		}
	}
	if cp := c.Cap; cp != nil {
		if cp.MaxCost == nil && cp.MaxTokens == nil {
			return fieldErr("cap", "give maxCost (USD) or maxTokens, or both")
		}
		if cp.MaxCost != nil && (!(*cp.MaxCost > 0) || math.IsInf(*cp.MaxCost, 0)) {
			return fieldErr("cap.maxCost", "must be a positive number of USD, got %v", *cp.MaxCost)
		}
		if cp.MaxTokens != nil && *cp.MaxTokens < 1 {
			return fieldErr("cap.maxTokens", "must be at least 1, got %d", *cp.MaxTokens)
		}
	}
	if t := c.TokenThrottle; t != nil {
		if t.Tokens < 1 {
			return fieldErr("tokenThrottle.tokens", "must be at least 1, got %d", t.Tokens)
		}
		if err := inRange("tokenThrottle.perMs", t.PerMs, msSecond, maxTokenThrottlePerMs); err != nil {
			return err
		}
		if t.Estimate < 0 || t.Estimate > t.Tokens {
			return fieldErr("tokenThrottle.estimate", "must be between 1 and tokens (%d), got %d", t.Tokens, t.Estimate)
		}
		if err := checkKey("tokenThrottle", t.Key); err != nil {
			return err
		}
	}
	return c.checkCombinations()
}

// checkCombinations refuses the combinations docs/protocol.md, "Controls" says cannot mean
// anything.
func (c *Controls) checkCombinations() error {
	if c.Batch == nil {
		return nil
	}
	others := []struct {
		name string
		set  bool
	}{
		{"debounce", c.Debounce != nil}, {"singleton", c.Singleton != nil}, {"priority", c.Priority != nil},
		{"rateLimit", c.RateLimit != nil}, {"idempotency", c.Idempotency != nil},
	}
	for _, o := range others {
		if o.set {
			return fieldErr(o.name, "cannot be combined with batch (a batch run has many events: no single key or payload to %s on)", o.name)
		}
	}
	return nil
}

func checkGCRA(field string, g *GCRALimit, maxPerMs int64) error {
	if g == nil {
		return nil
	}
	if g.Limit < 1 || g.Limit > MaxRate {
		return fieldErr(field+".limit", "must be between 1 and %d, got %d", MaxRate, g.Limit)
	}
	if err := inRange(field+".perMs", g.PerMs, msSecond, maxPerMs); err != nil {
		return err
	}
	return checkKey(field, g.Key)
}

func inRange(field string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return fieldErr(field, "must be between %d and %d ms (%s – %s), got %d", lo, hi,
			time.Duration(lo)*time.Millisecond, time.Duration(hi)*time.Millisecond, v)
	}
	return nil
}

// checkKey checks a key path, or only the length of a key expression (the caller
// compiles expressions: flowctl has no CEL).
func checkKey(field, path string) error {
	if path == "" {
		return nil
	}
	if IsKeyExpr(path) {
		if len(path) > MaxKeyExprLen {
			return fieldErr(field+".key", "the expression is %d bytes, the limit is %d", len(path), MaxKeyExprLen)
		}
		return nil
	}
	if err := CheckKeyPath(path); err != nil {
		return fieldErr(field+".key", "%v", err)
	}
	return nil
}

package flowctl

import (
	"encoding/json"
	"strconv"
)

// RunKey is one keyed control of a run as resolved when the run was created: the
// control ("concurrency", "concurrency[1]" for a second constraint, "throttle", ...), its
// key ("" when the control has none) and the resolved value ("" for the whole-workflow
// scope: no key, a missing field or a non-scalar). A path's value is a canonical JSON
// scalar; an expression's (Expr) is its JSON text with strings unquoted, and Error says
// why an expression had no value.
type RunKey struct {
	Control string `json:"control"`
	Path    string `json:"path,omitempty"`
	Value   string `json:"value,omitempty"`
	Expr    bool   `json:"expr,omitempty"`
	Error   string `json:"error,omitempty"`
}

// KeyedControl is one control of a definition that has a key: its name as RunKey.Control
// shows it, its field in the definition ("concurrency[1].key") and the key ("" for none).
type KeyedControl struct {
	Control, Field, Key string
}

// Keyed lists c's keyed controls in a fixed order (concurrency, throttle, rateLimit,
// debounce, batch, singleton, idempotency, tokenThrottle).
func (c Controls) Keyed() []KeyedControl {
	var out []KeyedControl
	add := func(control, field, key string) {
		out = append(out, KeyedControl{Control: control, Field: field + ".key", Key: key})
	}
	for i, cc := range c.Concurrency {
		name, field := "concurrency", "concurrency"
		if i > 0 {
			name += "[" + strconv.Itoa(i) + "]"
		}
		if len(c.Concurrency) > 1 {
			field = "concurrency[" + strconv.Itoa(i) + "]"
		}
		add(name, field, cc.Key)
	}
	if g := c.Throttle; g != nil {
		add("throttle", "throttle", g.Key)
	}
	if g := c.RateLimit; g != nil {
		add("rateLimit", "rateLimit", g.Key)
	}
	if g := c.Debounce; g != nil {
		add("debounce", "debounce", g.Key)
	}
	if g := c.Batch; g != nil {
		add("batch", "batch", g.Key)
	}
	if g := c.Singleton; g != nil {
		add("singleton", "singleton", g.Key)
	}
	if g := c.Idempotency; g != nil {
		add("idempotency", "idempotency", g.Key)
	}
	if g := c.TokenThrottle; g != nil {
		add("tokenThrottle", "tokenThrottle", g.Key)
	}
	return out
}

// WholeWorkflow reports whether the run falls into the control's whole-workflow scope.
func (k RunKey) WholeWorkflow() bool { return k.Value == "" }

// ResolveKeys resolves every keyed control of c in data as a dotted path, in the order
// of Keyed. Controls without a scope (priority, cap) are left out; nil when c has none.
func (c Controls) ResolveKeys(data json.RawMessage) []RunKey {
	var out []RunKey
	for _, k := range c.Keyed() {
		v, _ := ResolveKey(data, k.Key)
		out = append(out, RunKey{Control: k.Control, Path: k.Key, Value: v})
	}
	return out
}

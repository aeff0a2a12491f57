package flowctl

import (
	"encoding/json"
	"strconv"
)

// RunKey is one keyed control of a run as resolved when the run was created: the
// control ("concurrency", "concurrency[1]" for a second constraint, "throttle", ...), its
// key path ("" when the control has none) and the resolved value as a canonical JSON
// scalar ("" for the whole-workflow scope: no path, a missing field or a non-scalar).
type RunKey struct {
	Control string `json:"control"`
	Path    string `json:"path,omitempty"`
	Value   string `json:"value,omitempty"`
}

// WholeWorkflow reports whether the run falls into the control's whole-workflow scope.
func (k RunKey) WholeWorkflow() bool { return k.Value == "" }

// ResolveKeys resolves every keyed control of c in data, in a fixed order (concurrency,
// throttle, rateLimit, debounce, batch, singleton, idempotency, tokenThrottle). Controls
// without a scope (priority, cap) are left out; nil when c has none.
func (c Controls) ResolveKeys(data json.RawMessage) []RunKey {
	var out []RunKey
	add := func(control, path string) {
		v, _ := ResolveKey(data, path)
		out = append(out, RunKey{Control: control, Path: path, Value: v})
	}
	for i, cc := range c.Concurrency {
		name := "concurrency"
		if i > 0 {
			name += "[" + strconv.Itoa(i) + "]"
		}
		add(name, cc.Key)
	}
	if g := c.Throttle; g != nil {
		add("throttle", g.Key)
	}
	if g := c.RateLimit; g != nil {
		add("rateLimit", g.Key)
	}
	if g := c.Debounce; g != nil {
		add("debounce", g.Key)
	}
	if g := c.Batch; g != nil {
		add("batch", g.Key)
	}
	if g := c.Singleton; g != nil {
		add("singleton", g.Key)
	}
	if g := c.Idempotency; g != nil {
		add("idempotency", g.Key)
	}
	if g := c.TokenThrottle; g != nil {
		add("tokenThrottle", g.Key)
	}
	return out
}

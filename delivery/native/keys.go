package native

import (
	"errors"
	"fmt"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/flowctl/expr"
)

// Key expressions (docs/protocol.md, "Expressions, correlated waits, cancelOn"): a control's
// key is a dotted path into the event's data, or a CEL expression over `event` ({name, data,
// id, ts}) when it starts with "event." or is not a plain path. Expressions are compiled when
// the app is registered (compileDef) and kept in the service's cache, so each event only
// evaluates them.

// eventVar is the variable an expression over the run's event names it by.
const eventVar = "event"

// keyEvent is one event as key expressions see it, decoded at most once; each key is
// resolved at most once too (the gates, the run's publication and its shown keys all
// ask for the same ones).
type keyEvent struct {
	ev       payloadEvent
	vars     map[string]any
	err      error
	decoded  bool
	resolved map[string]flowctl.RunKey // by key text, Control left empty
}

func newKeyEvent(ev payloadEvent) *keyEvent { return &keyEvent{ev: ev} }

func (k *keyEvent) values() (map[string]any, error) {
	if !k.decoded {
		k.decoded = true
		ev, err := expr.Event(k.ev.ID, k.ev.Name, k.ev.Data, k.ev.Ts)
		k.vars, k.err = map[string]any{eventVar: ev}, err
	}
	return k.vars, k.err
}

// resolve resolves one control's key for the event: a path as flowctl.ResolveKey does,
// an expression as its value's JSON text (strings unquoted, bounded like a path's). An
// expression without a value ("" with Error set) puts the run in the empty key, as a
// path naming a missing field does.
func (s *Service) resolve(k *keyEvent, control, key string) flowctl.RunKey {
	rk, ok := k.resolved[key]
	if !ok {
		rk = s.resolveOnce(k, key)
		if k.resolved == nil {
			k.resolved = map[string]flowctl.RunKey{}
		}
		k.resolved[key] = rk
	}
	rk.Control = control
	return rk
}

func (s *Service) resolveOnce(k *keyEvent, key string) flowctl.RunKey {
	rk := flowctl.RunKey{Path: key}
	if key == "" {
		return rk
	}
	if !flowctl.IsKeyExpr(key) {
		rk.Value, _ = flowctl.ResolveKey(k.ev.Data, key)
		return rk
	}
	rk.Expr = true
	v, err := s.evalText(k, key)
	if err != nil {
		rk.Error = err.Error()
		return rk
	}
	rk.Value = flowctl.BoundKeyValue(v)
	return rk
}

func (s *Service) evalText(k *keyEvent, src string) (string, error) {
	p, err := s.exprs.Compile(src, eventVar)
	if err != nil {
		return "", err
	}
	vars, err := k.values()
	if err != nil {
		return "", err
	}
	return p.Text(vars)
}

// keyValue is resolve's value alone (what gate and flow-control keys are built from).
func (s *Service) keyValue(k *keyEvent, key string) string {
	return s.resolve(k, "", key).Value
}

// runKeys resolves every keyed control of d for the run's event (shown on GET /runs/{id}).
func (s *Service) runKeys(d *Workflow, k *keyEvent) []flowctl.RunKey {
	var out []flowctl.RunKey
	for _, c := range d.FlowControl.Keyed() {
		out = append(out, s.resolve(k, c.Control, c.Key))
	}
	return out
}

// priorityShiftMs is the run's priority: the definition's shiftMs, or priority.run
// evaluated for the event, in seconds clamped to ±flowctl.MaxPriorityRunS (no value: 0).
func (s *Service) priorityShiftMs(d *Workflow, k *keyEvent) int64 {
	p := d.FlowControl.Priority
	if p == nil {
		return 0
	}
	if p.Run == "" {
		return p.ShiftMs
	}
	prg, err := s.exprs.Compile(p.Run, eventVar)
	if err != nil {
		return 0
	}
	vars, err := k.values()
	if err != nil {
		return 0
	}
	secs, err := prg.Int(vars)
	if err != nil {
		return 0
	}
	return min(max(secs, -flowctl.MaxPriorityRunS), flowctl.MaxPriorityRunS) * 1000
}

// compileDef compiles a definition's expressions (key expressions, priority.run), naming
// the first that does not compile by its field and CEL's message.
func (s *Service) compileDef(d *Workflow) error {
	for _, c := range d.FlowControl.Keyed() {
		if c.Key == "" || !flowctl.IsKeyExpr(c.Key) {
			continue
		}
		if _, err := s.exprs.Compile(c.Key, eventVar); err != nil {
			return exprFieldError(c.Field, c.Key, err)
		}
	}
	if p := d.FlowControl.Priority; p != nil && p.Run != "" {
		prg, err := s.exprs.Compile(p.Run, eventVar)
		if err != nil {
			return exprFieldError("priority.run", p.Run, err)
		}
		if prg.OutputIsNot("int", "uint", "double") {
			return exprFieldError("priority.run", p.Run, fmt.Errorf("want a number of seconds, the expression is a %s", prg.OutputType()))
		}
	}
	return nil
}

// exprFieldError is a *flowctl.FieldError for an expression of field that does not compile.
func exprFieldError(field, src string, err error) error {
	msg := err.Error()
	var e *expr.Error
	if errors.As(err, &e) {
		msg = e.Msg
	}
	return &flowctl.FieldError{Field: field, Msg: fmt.Sprintf("expression %q: %s", src, msg)}
}

// Package expr owns Duraton's expressions: CEL (github.com/google/cel-go) programs over
// JSON values, as written in definitions (control keys, priority.run, cancelOn
// conditions), in wait conditions and in searches. A program is compiled once (Compile,
// or a Cache that keeps it), evaluated under a cost limit, and its value rendered as JSON
// text with strings unquoted (Text).
//
// Variables are dynamic: every name a program may use is declared when it is compiled
// (`event`, or `event` and `async`), so any other root is a compile error. JSON values
// are handed in as decoded by FromJSON (integers as int64, other numbers as float64) and
// numbers compare across int and double.
//
// expr is pure: it imports nothing of Duraton's and does no I/O.
package expr

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// Limits of a program.
const (
	// MaxSourceLen bounds an expression's text in bytes.
	MaxSourceLen = 1024
	// CostLimit bounds one evaluation (CEL's cost units: about one per operation and per
	// element a macro visits): an evaluation over it fails instead of running on.
	CostLimit = 10_000
)

// ErrNoValue is what Text and Int return for a program whose value is null.
var ErrNoValue = errors.New("the expression has no value (null)")

// Error is an expression that does not compile: Msg is CEL's message.
type Error struct {
	Source string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Program is a compiled expression, safe for concurrent use.
type Program struct {
	src  string
	vars []string
	prg  cel.Program
	out  *cel.Type
	ast  *cel.Ast
}

// Source is the expression's text.
func (p *Program) Source() string { return p.src }

// Compile parses and type-checks src with the variables vars declared (each of any
// type). A syntax error, a type error, an unknown variable or a text over MaxSourceLen is
// an *Error.
func Compile(src string, vars ...string) (*Program, error) {
	env, err := newEnv(vars)
	if err != nil {
		return nil, err
	}
	return compile(env, src, vars)
}

func newEnv(vars []string) (*cel.Env, error) {
	opts := []cel.EnvOption{cel.CrossTypeNumericComparisons(true)}
	for _, v := range vars {
		opts = append(opts, cel.Variable(v, cel.DynType))
	}
	return cel.NewEnv(opts...)
}

func compile(env *cel.Env, src string, vars []string) (*Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Source: src, Msg: "the expression is empty"}
	}
	if len(src) > MaxSourceLen {
		return nil, &Error{Source: src, Msg: fmt.Sprintf("the expression is %d bytes, the limit is %d", len(src), MaxSourceLen)}
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, &Error{Source: src, Msg: oneLine(iss.Err().Error())}
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit))
	if err != nil {
		return nil, &Error{Source: src, Msg: oneLine(err.Error())}
	}
	return &Program{src: src, vars: vars, prg: prg, out: ast.OutputType(), ast: ast}, nil
}

// oneLine keeps CEL's first line of each error (the caret drawings below it are for a
// terminal, not for a JSON error).
func oneLine(msg string) string {
	var keep []string
	for _, l := range strings.Split(msg, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "|") {
			continue
		}
		keep = append(keep, t)
	}
	return strings.Join(keep, "; ")
}

// CheckBool refuses a program whose type is known not to be bool (a condition).
func (p *Program) CheckBool() error {
	if p.out == nil || p.out.IsAssignableType(cel.BoolType) || p.out.IsExactType(cel.DynType) {
		return nil
	}
	return &Error{Source: p.src, Msg: fmt.Sprintf("a condition must be a bool, the expression is a %s", p.out)}
}

// Eval evaluates the program with vars (JSON values as FromJSON decodes them; a missing
// variable is an evaluation error).
func (p *Program) Eval(vars map[string]any) (ref.Val, error) {
	v, _, err := p.prg.Eval(vars)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Text evaluates the program and renders its value as JSON text with strings unquoted
// (see Render). Null is ErrNoValue.
func (p *Program) Text(vars map[string]any) (string, error) {
	v, err := p.Eval(vars)
	if err != nil {
		return "", err
	}
	return Render(v, false)
}

// Bool evaluates a condition: true only when the value is the bool true; an error or
// another type is an error.
func (p *Program) Bool(vars map[string]any) (bool, error) {
	v, err := p.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the condition is a %s, not a bool", v.Type().TypeName())
	}
	return bool(b), nil
}

// Int evaluates the program as an integer: an int, a uint or an integral double within
// int64. Null is ErrNoValue.
func (p *Program) Int(vars map[string]any) (int64, error) {
	v, err := p.Eval(vars)
	if err != nil {
		return 0, err
	}
	switch n := v.(type) {
	case types.Int:
		return int64(n), nil
	case types.Uint:
		if uint64(n) > 1<<63-1 {
			return 0, fmt.Errorf("the value %d is out of range", uint64(n))
		}
		return int64(n), nil
	case types.Double:
		f := float64(n)
		if f != f || f < -(1<<63) || f >= 1<<63 || f != float64(int64(f)) {
			return 0, fmt.Errorf("the value %v is not an integer", f)
		}
		return int64(f), nil
	case types.Null:
		return 0, ErrNoValue
	}
	return 0, fmt.Errorf("the value is a %s, not a number", v.Type().TypeName())
}

// OutputType names the type the checker found for the program ("dyn" when it depends on
// the variables).
func (p *Program) OutputType() string {
	if p.out == nil {
		return "dyn"
	}
	return p.out.String()
}

// OutputIsNot reports whether the program's type is known and none of kinds (CEL type
// names: "int", "string", ...); a dyn program may be any of them.
func (p *Program) OutputIsNot(kinds ...string) bool {
	t := p.OutputType()
	if t == "dyn" {
		return false
	}
	for _, k := range kinds {
		if t == k {
			return false
		}
	}
	return true
}

// EqualityConjunct finds a path P such that the program is true only when
// `left.P == right.P`: the whole program, or one operand of its top-level chain of &&,
// is that equality (either side order). Such a program can be indexed by P.
func (p *Program) EqualityConjunct(left, right string) (string, bool) {
	return equalityIn(p.ast.NativeRep().Expr(), left, right)
}

func equalityIn(e celast.Expr, left, right string) (string, bool) {
	if e.Kind() != celast.CallKind {
		return "", false
	}
	call := e.AsCall()
	args := call.Args()
	switch {
	case call.FunctionName() == "_&&_":
		for _, a := range args {
			if path, ok := equalityIn(a, left, right); ok {
				return path, true
			}
		}
	case call.FunctionName() == "_==_" && len(args) == 2:
		l, lroot := selectPath(args[0])
		r, rroot := selectPath(args[1])
		if l != "" && l == r && (lroot == left && rroot == right || lroot == right && rroot == left) {
			return l, true
		}
	}
	return "", false
}

// selectPath reads `root.a.b` as ("a.b", "root"); anything else is ("", "").
func selectPath(e celast.Expr) (path, root string) {
	var segs []string
	for e.Kind() == celast.SelectKind {
		s := e.AsSelect()
		if s.IsTestOnly() {
			return "", ""
		}
		segs = append([]string{s.FieldName()}, segs...)
		e = s.Operand()
	}
	if e.Kind() != celast.IdentKind || len(segs) == 0 {
		return "", ""
	}
	return strings.Join(segs, "."), e.AsIdent()
}

package retrydelay

import "math"

// node is one vertex of a parsed expression. eval is total: it never panics and maps
// every input to a float64, possibly NaN or ±Inf.
type node interface {
	eval(retried float64) float64
}

type number float64

func (n number) eval(float64) float64 { return float64(n) }

type variable struct{}

func (variable) eval(retried float64) float64 { return retried }

type negate struct{ x node }

func (n negate) eval(r float64) float64 { return -n.x.eval(r) }

type binary struct {
	op   byte // one of + - * / %
	l, r node
}

func (b binary) eval(r float64) float64 {
	l, rr := b.l.eval(r), b.r.eval(r)
	switch b.op {
	case '+':
		return l + rr
	case '-':
		return l - rr
	case '*':
		return l * rr
	case '/':
		return l / rr
	default: // '%', the only other operator the parser builds
		return math.Mod(l, rr)
	}
}

// call1 is a one-argument function: exp, sqrt, abs, floor, ceil, round.
type call1 struct {
	fn func(float64) float64
	x  node
}

func (c call1) eval(r float64) float64 { return c.fn(c.x.eval(r)) }

type pow struct{ base, exp node }

func (p pow) eval(r float64) float64 { return math.Pow(p.base.eval(r), p.exp.eval(r)) }

// extremum is min or max over one or more arguments. Like JavaScript, a NaN argument
// makes the result NaN.
type extremum struct {
	max  bool
	args []node
}

func (m extremum) eval(r float64) float64 {
	acc := m.args[0].eval(r)
	for _, a := range m.args[1:] {
		if m.max {
			acc = math.Max(acc, a.eval(r))
		} else {
			acc = math.Min(acc, a.eval(r))
		}
	}
	return acc
}

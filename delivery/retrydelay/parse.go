package retrydelay

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

type tokenKind uint8

const (
	tokEOF tokenKind = iota
	tokNumber
	tokIdent
	tokPunct // one of + - * / % ( ) ,
)

type token struct {
	kind tokenKind
	pos  int    // byte offset of the first character
	text string // source text of the token
	num  float64
}

// describe names a token for error messages.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of input"
	case tokNumber:
		return "number " + t.text
	case tokIdent:
		return strconv.Quote(t.text)
	}
	return "'" + t.text + "'"
}

// lexer splits the source into tokens on demand.
type lexer struct {
	src string
	pos int
}

func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
		l.pos++
	}
	start := l.pos
	if start == len(l.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	c := l.src[start]
	switch {
	case isDigit(c) || c == '.':
		return l.number()
	case isIdentStart(c):
		for l.pos < len(l.src) && isIdentPart(l.src[l.pos]) {
			l.pos++
		}
		return token{kind: tokIdent, pos: start, text: l.src[start:l.pos]}, nil
	}
	switch c {
	case '+', '-', '*', '/', '%', '(', ')', ',':
		l.pos++
		return token{kind: tokPunct, pos: start, text: l.src[start:l.pos]}, nil
	}
	r, _ := utf8.DecodeRuneInString(l.src[start:])
	return token{}, errorAt(start, "unexpected character %q", r)
}

// number scans digits [ "." digits ] [ exponent ], with digits on at least one side of
// the dot.
func (l *lexer) number() (token, error) {
	start := l.pos
	intDigits := l.digits()
	fracDigits := 0
	if l.pos < len(l.src) && l.src[l.pos] == '.' {
		l.pos++
		fracDigits = l.digits()
	}
	if intDigits+fracDigits == 0 {
		return token{}, errorAt(start, "expected a digit after '.'")
	}
	if l.pos < len(l.src) && (l.src[l.pos] == 'e' || l.src[l.pos] == 'E') {
		l.pos++
		if l.pos < len(l.src) && (l.src[l.pos] == '+' || l.src[l.pos] == '-') {
			l.pos++
		}
		if l.digits() == 0 {
			return token{}, errorAt(l.pos, "expected digits in the exponent of the number at column %d", start+1)
		}
	}
	text := l.src[start:l.pos]
	v, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(v, 0) {
		return token{}, errorAt(start, "number %s is out of range", text)
	}
	return token{kind: tokNumber, pos: start, text: text, num: v}, nil
}

func (l *lexer) digits() int {
	start := l.pos
	for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
		l.pos++
	}
	return l.pos - start
}

func isSpace(c byte) bool      { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }

// parser is a recursive-descent parser with one token of lookahead. depth and nodes
// enforce MaxDepth and MaxNodes.
type parser struct {
	lex   lexer
	tok   token
	depth int
	nodes int
}

func (p *parser) parse() (node, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, errorAt(p.tok.pos, "expected an operator or end of input, found %s", p.tok.describe())
	}
	return n, nil
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) isPunct(s string) bool { return p.tok.kind == tokPunct && p.tok.text == s }

// add counts a new node against MaxNodes.
func (p *parser) add(n node, pos int) (node, error) {
	p.nodes++
	if p.nodes > MaxNodes {
		return nil, errorAt(pos, "expression has more than %d nodes", MaxNodes)
	}
	return n, nil
}

// enter and leave bracket every recursive descent that nests, bounding MaxDepth.
func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > MaxDepth {
		return errorAt(pos, "expression is nested more than %d levels deep", MaxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// expr = term { ("+" | "-") term }
func (p *parser) expr() (node, error) {
	return p.binaryLevel(p.term, "+", "-")
}

// term = unary { ("*" | "/" | "%") unary }
func (p *parser) term() (node, error) {
	return p.binaryLevel(p.unary, "*", "/", "%")
}

// binaryLevel parses a left-associative chain of operand separated by ops.
func (p *parser) binaryLevel(operand func() (node, error), ops ...string) (node, error) {
	left, err := operand()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tokPunct && slices.Contains(ops, p.tok.text) {
		op := p.tok
		if err := p.advance(); err != nil {
			return nil, err
		}
		right, err := operand()
		if err != nil {
			return nil, err
		}
		if left, err = p.add(binary{op: op.text[0], l: left, r: right}, op.pos); err != nil {
			return nil, err
		}
	}
	return left, nil
}

// unary = ("-" | "+") unary | primary
func (p *parser) unary() (node, error) {
	if !p.isPunct("-") && !p.isPunct("+") {
		return p.primary()
	}
	sign := p.tok
	if err := p.enter(sign.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	if err := p.advance(); err != nil {
		return nil, err
	}
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	if sign.text == "+" {
		return x, nil
	}
	return p.add(negate{x: x}, sign.pos)
}

// primary = number | "retried" | func "(" args ")" | "(" expr ")"
func (p *parser) primary() (node, error) {
	t := p.tok
	switch {
	case t.kind == tokNumber:
		if err := p.advance(); err != nil {
			return nil, err
		}
		return p.add(number(t.num), t.pos)
	case t.kind == tokIdent:
		if err := p.advance(); err != nil {
			return nil, err
		}
		if t.text == "retried" {
			if p.isPunct("(") {
				return nil, errorAt(p.tok.pos, `"retried" is a variable, not a function`)
			}
			return p.add(variable{}, t.pos)
		}
		return p.call(t)
	case p.isPunct("("):
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")", "to close '(' at column %d", t.pos+1); err != nil {
			return nil, err
		}
		return x, nil
	}
	return nil, errorAt(t.pos, "expected a number, \"retried\", a function call or '(', found %s", t.describe())
}

// call parses the argument list of the function named by name, which has been consumed.
func (p *parser) call(name token) (node, error) {
	fn, ok := lookup(name.text)
	if !ok {
		return nil, errorAt(name.pos, "unknown name %s: expected \"retried\" or one of pow, exp, sqrt, abs, floor, ceil, round, min, max", name.describe())
	}
	if !p.isPunct("(") {
		return nil, errorAt(p.tok.pos, "expected '(' after function %s, found %s", name.text, p.tok.describe())
	}
	if err := p.enter(p.tok.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	if err := p.advance(); err != nil {
		return nil, err
	}
	var args []node
	for {
		a, err := p.expr()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if !p.isPunct(",") {
			break
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if err := p.expect(")", "to close the arguments of %s", name.text); err != nil {
		return nil, err
	}
	if len(args) < fn.min || fn.max > 0 && len(args) > fn.max {
		return nil, errorAt(name.pos, "%s takes %s, got %d", name.text, fn.arity(), len(args))
	}
	return p.add(fn.build(args), name.pos)
}

// expect consumes the punctuation s or fails with "expected s <why>, found …".
func (p *parser) expect(s, why string, args ...any) error {
	if !p.isPunct(s) {
		return errorAt(p.tok.pos, "expected '%s' %s, found %s", s, fmt.Sprintf(why, args...), p.tok.describe())
	}
	return p.advance()
}

// function is a callable name: its accepted argument count (max 0 means unbounded)
// and the constructor of its node.
type function struct {
	min, max int
	build    func(args []node) node
}

// arity describes the accepted argument count for error messages.
func (f function) arity() string {
	switch {
	case f.max == 0:
		return fmt.Sprintf("at least %d argument(s)", f.min)
	case f.max == 1:
		return "exactly 1 argument"
	}
	return fmt.Sprintf("exactly %d arguments", f.max)
}

// lookup returns the function called name.
func lookup(name string) (function, bool) {
	unary := func(fn func(float64) float64) function {
		return function{min: 1, max: 1, build: func(a []node) node { return call1{fn: fn, x: a[0]} }}
	}
	switch name {
	case "pow":
		return function{min: 2, max: 2, build: func(a []node) node { return pow{base: a[0], exp: a[1]} }}, true
	case "min":
		return function{min: 1, build: func(a []node) node { return extremum{args: a} }}, true
	case "max":
		return function{min: 1, build: func(a []node) node { return extremum{max: true, args: a} }}, true
	case "exp":
		return unary(math.Exp), true
	case "sqrt":
		return unary(math.Sqrt), true
	case "abs":
		return unary(math.Abs), true
	case "floor":
		return unary(math.Floor), true
	case "ceil":
		return unary(math.Ceil), true
	case "round":
		return unary(math.Round), true
	}
	return function{}, false
}

func errorAt(pos int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Offset: pos, Msg: fmt.Sprintf(format, args...)}
}

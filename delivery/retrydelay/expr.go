package retrydelay

import (
	"errors"
	"fmt"
	"math"
)

// Limits on a source expression. Legitimate expressions are a few dozen bytes; the
// limits only keep hostile input cheap.
const (
	// MaxLen is the longest source Parse accepts, in bytes.
	MaxLen = 256
	// MaxDepth bounds nesting: parentheses, function calls and unary signs.
	MaxDepth = 32
	// MaxNodes bounds the size of the parsed tree.
	MaxNodes = 128
)

// Expr is a parsed retry-delay expression over the variable retried, in milliseconds.
// It is immutable and safe for concurrent use.
type Expr struct {
	src  string
	root node
}

// Parse parses src. A failure is a *SyntaxError naming the offending column and what
// was expected there.
func Parse(src string) (*Expr, error) {
	if len(src) > MaxLen {
		return nil, &SyntaxError{Offset: MaxLen, Msg: fmt.Sprintf("expression is %d bytes long, limit is %d", len(src), MaxLen)}
	}
	p := parser{lex: lexer{src: src}}
	root, err := p.parse()
	if err != nil {
		return nil, err
	}
	return &Expr{src: src, root: root}, nil
}

// Eval evaluates e for the given retry number (0 for the first retry) and returns the
// delay in milliseconds. The error is non-nil exactly when the result is not a finite
// number (NaN or ±Inf, e.g. 1/0 or exp(1e308)); the raw value is still returned.
func (e *Expr) Eval(retried int) (float64, error) {
	if e == nil {
		return 0, errors.New("retrydelay: nil expression")
	}
	v := e.root.eval(float64(retried))
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v, fmt.Errorf("retrydelay: %q evaluates to %v for retried=%d", e.src, v, retried)
	}
	return v, nil
}

// String returns the source text e was parsed from.
func (e *Expr) String() string {
	if e == nil {
		return ""
	}
	return e.src
}

// SyntaxError reports why and where Parse rejected an expression.
type SyntaxError struct {
	Offset int    // byte offset into the source, 0-based
	Msg    string // what was expected, or which limit was hit
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("retrydelay: column %d: %s", e.Offset+1, e.Msg)
}

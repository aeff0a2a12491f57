package retrydelay_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery/retrydelay"
)

func TestEval(t *testing.T) {
	t.Parallel()

	tests := []struct {
		src     string
		retried int
		want    float64
	}{
		// Examples from the protocol and the docs.
		{src: "1000 * (1 + retried)", retried: 0, want: 1000},
		{src: "1000 * (1 + retried)", retried: 3, want: 4000},
		{src: "pow(2, retried) * 1000", retried: 0, want: 1000},
		{src: "pow(2, retried) * 1000", retried: 5, want: 32000},
		{src: "max(1000, min(5000, retried*100))", retried: 3, want: 1000},
		{src: "max(1000, min(5000, retried*100))", retried: 20, want: 2000},
		{src: "max(1000, min(5000, retried*100))", retried: 90, want: 5000},

		// Numbers.
		{src: "42", want: 42},
		{src: "1.5", want: 1.5},
		{src: ".5", want: 0.5},
		{src: "2.", want: 2},
		{src: "1e3", want: 1000},
		{src: "1.5E+2", want: 150},
		{src: "25e-1", want: 2.5},
		{src: "007", want: 7},

		// Precedence and associativity.
		{src: "1 + 2 * 3", want: 7},
		{src: "(1 + 2) * 3", want: 9},
		{src: "10 - 4 - 3", want: 3},
		{src: "64 / 4 / 2", want: 8},
		{src: "2 * 3 % 4", want: 2},
		{src: "7 % 4 * 2", want: 6},
		{src: "1 - -1", want: 2},
		{src: "-2 * -3", want: 6},
		{src: "+5", want: 5},
		{src: "- (3 + 4) * 2", want: -14},
		{src: "--1", want: 1},
		{src: "-retried", retried: 4, want: -4},
		{src: "-7 % 3", want: -1},
		{src: "7.5 % 2", want: 1.5},

		// Whitespace.
		{src: " \t1000\n*\r\nretried ", retried: 2, want: 2000},
		{src: "max ( 1 , 2 )", want: 2},

		// Functions.
		{src: "exp(0)", want: 1},
		{src: "sqrt(16)", want: 4},
		{src: "abs(-3)", want: 3},
		{src: "floor(2.7)", want: 2},
		{src: "floor(-2.5)", want: -3},
		{src: "ceil(2.1)", want: 3},
		{src: "round(2.5)", want: 3},
		{src: "round(2.4)", want: 2},
		{src: "min(3)", want: 3},
		{src: "max(1, 5, 3, 4)", want: 5},
		{src: "min(4, 2, 8, retried)", retried: 1, want: 1},
		{src: "pow(retried, 2) + sqrt(retried)", retried: 9, want: 84},
		{src: "floor(exp(2.5 * (retried + 1))) * 1000", retried: 0, want: 12000},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()

			e, err := retrydelay.Parse(tt.src)
			require.NoError(t, err)
			require.Equal(t, tt.src, e.String())
			got, err := e.Eval(tt.retried)
			require.NoError(t, err)
			require.InDelta(t, tt.want, got, 1e-9)
		})
	}
}

func TestEvalNotFinite(t *testing.T) {
	t.Parallel()

	tests := []struct {
		src     string
		retried int
	}{
		{src: "1/0"},
		{src: "-1/0"},
		{src: "0/0"},
		{src: "1 % 0"},
		{src: "1000 / retried", retried: 0},
		{src: "exp(1e308)"},
		{src: "pow(10, 400)"},
		{src: "pow(1e308, retried)", retried: 2},
		{src: "sqrt(-1)"},
		{src: "1e308 * 10"},
		{src: "max(1, 0/0)"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()

			e, err := retrydelay.Parse(tt.src)
			require.NoError(t, err)
			got, err := e.Eval(tt.retried)
			require.Error(t, err)
			require.True(t, math.IsNaN(got) || math.IsInf(got, 0), "got %v", got)
		})
	}
}

func TestEvalNil(t *testing.T) {
	t.Parallel()

	var e *retrydelay.Expr
	_, err := e.Eval(0)
	require.Error(t, err)
	require.Empty(t, e.String())
}

func TestParseErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name       string
		src        string
		wantOffset int
		wantMsg    string // substring of SyntaxError.Msg
	}{
		{name: "Empty", src: "", wantOffset: 0, wantMsg: "found end of input"},
		{name: "Blank", src: "   ", wantOffset: 3, wantMsg: "found end of input"},
		{name: "UnknownIdentifier", src: "1000 * attempt", wantOffset: 7, wantMsg: `unknown name "attempt"`},
		{name: "CaseSensitive", src: "Retried", wantOffset: 0, wantMsg: `unknown name "Retried"`},
		{name: "RetriedCall", src: "retried(1)", wantOffset: 7, wantMsg: `"retried" is a variable, not a function`},
		{name: "FunctionWithoutParens", src: "pow + 1", wantOffset: 4, wantMsg: "expected '(' after function pow, found '+'"},
		{name: "TrailingGarbage", src: "1000 1", wantOffset: 5, wantMsg: "expected an operator or end of input, found number 1"},
		{name: "TrailingParen", src: "(1))", wantOffset: 3, wantMsg: "found ')'"},
		{name: "Juxtaposition", src: "2retried", wantOffset: 1, wantMsg: `found "retried"`},
		{name: "UnclosedParen", src: "(1 + 2", wantOffset: 6, wantMsg: "expected ')' to close '(' at column 1, found end of input"},
		{name: "UnclosedCall", src: "max(1, 2", wantOffset: 8, wantMsg: "expected ')' to close the arguments of max"},
		{name: "EmptyParens", src: "()", wantOffset: 1, wantMsg: "expected a number"},
		{name: "EmptyCall", src: "min()", wantOffset: 4, wantMsg: "found ')'"},
		{name: "TrailingComma", src: "min(1,)", wantOffset: 6, wantMsg: "found ')'"},
		{name: "PowOneArg", src: "pow(2)", wantOffset: 0, wantMsg: "pow takes exactly 2 arguments, got 1"},
		{name: "PowThreeArgs", src: "pow(2, 3, 4)", wantOffset: 0, wantMsg: "pow takes exactly 2 arguments, got 3"},
		{name: "SqrtTwoArgs", src: "1 + sqrt(4, 9)", wantOffset: 4, wantMsg: "sqrt takes exactly 1 argument, got 2"},
		{name: "DanglingOperator", src: "1 +", wantOffset: 3, wantMsg: "found end of input"},
		{name: "DoubleOperator", src: "1 * / 2", wantOffset: 4, wantMsg: "found '/'"},
		{name: "Caret", src: "2 ^ 3", wantOffset: 2, wantMsg: "unexpected character '^'"},
		{name: "NonASCII", src: "1 × 2", wantOffset: 2, wantMsg: "unexpected character '×'"},
		{name: "LoneDot", src: ".", wantOffset: 0, wantMsg: "expected a digit after '.'"},
		{name: "BadExponent", src: "1e+", wantOffset: 3, wantMsg: "expected digits in the exponent"},
		{name: "NumberOutOfRange", src: "1e400", wantOffset: 0, wantMsg: "number 1e400 is out of range"},
		{name: "Hex", src: "0x10", wantOffset: 1, wantMsg: `found "x10"`},
		{name: "Comma", src: "1, 2", wantOffset: 1, wantMsg: "found ','"},
		{name: "TooLong", src: strings.Repeat("1+", 128) + "1", wantOffset: retrydelay.MaxLen, wantMsg: "limit is 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			e, err := retrydelay.Parse(tt.src)
			require.Nil(t, e)
			var syn *retrydelay.SyntaxError
			require.ErrorAs(t, err, &syn)
			require.Equal(t, tt.wantOffset, syn.Offset, "error: %v", err)
			require.Contains(t, syn.Msg, tt.wantMsg)
			require.Contains(t, err.Error(), "column ")
		})
	}
}

func TestParseHostile(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		src     string
		wantMsg string // empty: must parse
	}{
		{name: "DepthAtLimit", src: strings.Repeat("(", retrydelay.MaxDepth) + "1" + strings.Repeat(")", retrydelay.MaxDepth)},
		{name: "DepthOverLimit", src: strings.Repeat("(", retrydelay.MaxDepth+1) + "1" + strings.Repeat(")", retrydelay.MaxDepth+1), wantMsg: "nested more than 32 levels"},
		{name: "OpenParensOnly", src: strings.Repeat("(", retrydelay.MaxLen), wantMsg: "nested more than 32 levels"},
		{name: "NestedCalls", src: strings.Repeat("abs(", 40) + "1" + strings.Repeat(")", 40), wantMsg: "nested more than 32 levels"},
		{name: "UnarySigns", src: strings.Repeat("-", 100) + "1", wantMsg: "nested more than 32 levels"},
		{name: "TooManyNodes", src: strings.Repeat("1+", 100) + "1", wantMsg: "more than 128 nodes"},
		{name: "WideMax", src: "max(" + strings.Repeat("-1,", 80) + "1)", wantMsg: "more than 128 nodes"},
		{name: "LongWhitespace", src: strings.Repeat(" ", retrydelay.MaxLen-1) + "1"},
		{name: "LongNumber", src: "1" + strings.Repeat("0", 300), wantMsg: "limit is 256"},
		{name: "NulByte", src: "1\x00", wantMsg: "unexpected character"},
		{name: "InvalidUTF8", src: "1 + \xff", wantMsg: "unexpected character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			e, err := retrydelay.Parse(tt.src)
			if tt.wantMsg == "" {
				require.NoError(t, err)
				_, err = e.Eval(0)
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantMsg)
		})
	}
}

func TestExprConcurrentEval(t *testing.T) {
	t.Parallel()

	e, err := retrydelay.Parse("max(1000, min(60000, pow(2, retried) * 1000))")
	require.NoError(t, err)

	done := make(chan float64)
	for i := range 8 {
		go func() {
			v, _ := e.Eval(i)
			done <- v
		}()
	}
	for range 8 {
		require.GreaterOrEqual(t, <-done, 1000.0)
	}
}

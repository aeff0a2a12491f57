// Package retrydelay owns the retry schedule of a message: the evaluator of the
// Upstash-Retry-Delay expression (docs/protocol.md, "Publishing a message") and the
// default exponential backoff used when there is none or when it yields no usable number.
//
// An expression is ordinary arithmetic over one variable, retried (0 for the first
// retry), and gives a delay in milliseconds:
//
//	1000 * (1 + retried)
//	pow(2, retried) * 1000
//	max(1000, min(5000, retried * 100))
//
// Grammar (whitespace is allowed between tokens):
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = ("-" | "+") unary | primary
//	primary = number | "retried" | func "(" expr { "," expr } ")" | "(" expr ")"
//	number  = digits [ "." digits ] [ ("e" | "E") [ "+" | "-" ] digits ]   (or "." digits …)
//	func    = pow (2 args) | min, max (1 or more) | exp, sqrt, abs, floor, ceil, round (1)
//
// Arithmetic is IEEE-754 float64 as in JavaScript: % is the truncated remainder
// (math.Mod), division by zero gives ±Inf, round rounds half away from zero. The parser
// is hand-written recursive descent; the source length, nesting depth and node count are
// bounded (MaxLen, MaxDepth, MaxNodes) so hostile headers cost little, and evaluation
// never panics. Delay turns any non-finite or failed result into the default Backoff.
//
// Everything is a pure function of its inputs: no clock, no globals. The package
// imports only the standard library and must not import any other Duraton package.
package retrydelay

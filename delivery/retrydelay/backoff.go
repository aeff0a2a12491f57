package retrydelay

import (
	"math"
	"time"
)

// MaxDelay caps every retry delay, computed or default.
const MaxDelay = 24 * time.Hour

// Backoff is the default retry delay when a message has no Upstash-Retry-Delay:
// min(86400, e^(2.5·n)) seconds with n = retried+1, where retried is 0 for the first
// retry. That gives about 12.2s, 2m28s, 30m8s, 6h7m, then 24h from retried=4 on.
// A negative retried counts as 0.
func Backoff(retried int) time.Duration {
	n := math.Max(0, float64(retried)) + 1
	secs := math.Min(MaxDelay.Seconds(), math.Exp(2.5*n))
	return time.Duration(secs * float64(time.Second))
}

// Delay is the wait before retry number retried (0 for the first retry) of a message
// whose Upstash-Retry-Delay parsed to e. With no expression (e == nil), or when e does
// not give a finite number, it is Backoff(retried); otherwise e's milliseconds clamped
// to [0, MaxDelay].
func Delay(e *Expr, retried int) time.Duration {
	if e == nil {
		return Backoff(retried)
	}
	ms, err := e.Eval(retried)
	if err != nil {
		return Backoff(retried)
	}
	switch {
	case ms <= 0:
		return 0
	case ms >= float64(MaxDelay/time.Millisecond):
		return MaxDelay
	}
	return time.Duration(ms * float64(time.Millisecond))
}

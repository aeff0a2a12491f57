package delivery

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter caps an endpoint-requested delay; a longer request falls back to the
// normal backoff schedule (docs/guarantees.md, "Delivery semantics").
const maxRetryAfter = 24 * time.Hour

// RetryAfter reads the delay an endpoint asked for: Retry-After as seconds, a duration
// ("10s", "2m") or an HTTP date, else X-RateLimit-Reset(-Requests|-Tokens) as seconds.
// It returns 0 when there is none, or when it is negative or over a day.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	for _, name := range []string{"Retry-After", "X-Ratelimit-Reset", "X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens"} {
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			continue
		}
		if d, ok := parseRetryAfter(v, now); ok && d > 0 && d <= maxRetryAfter {
			return d
		}
		return 0
	}
	return 0
}

func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n < 0 || n > maxRetryAfter.Seconds() {
			return 0, false
		}
		return time.Duration(n * float64(time.Second)), true
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(now), true
	}
	return 0, false
}

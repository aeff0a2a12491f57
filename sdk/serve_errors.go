package sdk

import (
	"errors"
	"fmt"
	"time"
)

// nonRetryableError makes a route's failure final: no more retries, straight to the
// failure function (the endpoint answers 489 with Upstash-NonRetryable-Error).
type nonRetryableError struct{ err error }

func (e *nonRetryableError) Error() string { return e.err.Error() }
func (e *nonRetryableError) Unwrap() error { return e.err }

// NonRetryable wraps err so that returning it from a workflow route ends the run without
// further retries.
func NonRetryable(err error) error { return &nonRetryableError{err: err} }

// retryAfterError asks for the next attempt after a delay (429 with Retry-After).
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter wraps err so that returning it from a workflow route retries the delivery
// after d instead of the normal backoff.
func RetryAfter(d time.Duration, err error) error { return &retryAfterError{err: err, after: d} }

// ErrNonDeterministic is returned (and answered with 500) when a replayed step's name or
// type differs from the recorded history: the route is not deterministic.
var ErrNonDeterministic = errors.New("workflow step does not match the recorded history")

func mismatch(stepID int, wantName, wantType, gotName, gotType string) error {
	return fmt.Errorf("%w: step %d is %q (%s) in the history but the route now calls %q (%s)",
		ErrNonDeterministic, stepID, gotName, gotType, wantName, wantType)
}

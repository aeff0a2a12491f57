package flowctl

// DebounceDeadline is when a debounce burst whose first event came at firstMs fires after
// an event at nowMs (unix ms): periodMs of quiet, capped at timeoutMs after the first
// event when timeoutMs is set (a cap already passed makes the burst due now).
func DebounceDeadline(firstMs, nowMs, periodMs, timeoutMs int64) int64 {
	d := nowMs + periodMs
	if timeoutMs > 0 && firstMs+timeoutMs < d {
		d = firstMs + timeoutMs
	}
	return d
}

// BatchDeadline is when a batch whose first event came at firstMs is flushed although
// not full.
func BatchDeadline(firstMs, timeoutMs int64) int64 { return firstMs + timeoutMs }

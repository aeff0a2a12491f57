package delivery

// callbackRedaction is the redaction of a callback message whose source message has r: a
// callback's body carries the source's body and headers (sourceBody, sourceHeader), so
// the API hides the whole body of the callback when the source hides anything.
func callbackRedaction(r *Redaction) *Redaction {
	if r == nil || (!r.Body && !r.AllHeaders && len(r.Headers) == 0) {
		return nil
	}
	return &Redaction{Body: true}
}

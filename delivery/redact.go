package delivery

import (
	"net/http"
	"strings"
)

// What the API hides of a message: the parts its publisher named in
// Upstash-Redact-Fields, and every credential header of a workflow call. A call's
// headers are meant for the API it calls (a provider key, an organization id, a
// session cookie): they are sent there unchanged, but no view, log, dead letter or
// callback payload shows them.

// credentialWords mark a header name as a credential when it contains one of them
// (case-insensitive): Authorization, X-Api-Key, X-Goog-Api-Key, OpenAI-Organization,
// X-Amz-Security-Token, Cookie, ...
var credentialWords = []string{
	"auth", "key", "token", "secret", "pass", "cookie", "session", "signature",
	"credential", "organization", "project",
}

// CredentialHeader reports whether a workflow call's header may carry a credential,
// judged by its name.
func CredentialHeader(name string) bool {
	name = strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// isCall reports whether m is a workflow call (context.call, an AI step): a request to
// another API on the run's behalf, whose credential headers are hidden.
func isCall(m *Message) bool { return m.RunID != "" && m.CallType == CallToCallback }

// ViewRedaction is what the API must hide of m wherever it shows it: its
// Upstash-Redact-Fields, and for a workflow call the headers CredentialHeader names.
// It is applied when a message is shown, so records stored before a word was added
// are hidden too. m.Redact is not modified.
func ViewRedaction(m *Message) *Redaction {
	if !isCall(m) {
		return m.Redact
	}
	var hide []string
	for name := range m.Header {
		if CredentialHeader(name) {
			hide = append(hide, http.CanonicalHeaderKey(name)) // as redactHeader compares
		}
	}
	if len(hide) == 0 {
		return m.Redact
	}
	r := Redaction{}
	if m.Redact != nil {
		r = *m.Redact
	}
	r.Headers = append(append([]string(nil), r.Headers...), hide...)
	return &r
}

// withoutCredentials is h without the headers CredentialHeader names.
func withoutCredentials(h map[string][]string) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		if !CredentialHeader(k) {
			out[k] = v
		}
	}
	return out
}

// callbackRedaction is the redaction of a callback message whose source message has r: a
// callback's body carries the source's body and headers (sourceBody, sourceHeader), so
// the API hides the whole body of the callback when the source hides anything.
func callbackRedaction(r *Redaction) *Redaction {
	if r == nil || (!r.Body && !r.AllHeaders && len(r.Headers) == 0) {
		return nil
	}
	return &Redaction{Body: true}
}

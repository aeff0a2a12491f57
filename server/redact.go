package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// redacted replaces what Upstash-Redact-Fields hides in the API's views.
const redacted = "REDACTED"

// maxRedactFields caps the items of one Upstash-Redact-Fields value.
const maxRedactFields = 64

// parseRedact reads Upstash-Redact-Fields: a comma-separated list of `body`, `header`
// (every header) and `header[Name]`.
func parseRedact(v string) (*delivery.Redaction, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	items := strings.Split(v, ",")
	if len(items) > maxRedactFields {
		return nil, headerError(wire.HeaderRedactFields, "more than %d fields", maxRedactFields)
	}
	r := &delivery.Redaction{}
	for _, item := range items {
		item = strings.TrimSpace(item)
		switch {
		case strings.EqualFold(item, "body"):
			r.Body = true
		case strings.EqualFold(item, "header"):
			r.AllHeaders = true
		case len(item) > len("header[]") && strings.EqualFold(item[:len("header[")], "header[") && strings.HasSuffix(item, "]"):
			name := item[len("header[") : len(item)-1]
			if !isToken(name) {
				return nil, headerError(wire.HeaderRedactFields, "%q is not a header name", name)
			}
			if c := http.CanonicalHeaderKey(name); !slices.Contains(r.Headers, c) {
				r.Headers = append(r.Headers, c)
			}
		default:
			return nil, headerError(wire.HeaderRedactFields, "unknown field %q (want body, header or header[Name])", item)
		}
	}
	return r, nil
}

// redactHeader returns h with the values r hides replaced. h is not modified.
func redactHeader(h map[string][]string, r *delivery.Redaction) map[string][]string {
	if r == nil || len(h) == 0 || (!r.AllHeaders && len(r.Headers) == 0) {
		return h
	}
	out := make(map[string][]string, len(h))
	for name, values := range h {
		if r.AllHeaders || slices.Contains(r.Headers, http.CanonicalHeaderKey(name)) {
			out[name] = []string{redacted}
			continue
		}
		out[name] = values
	}
	return out
}

// redactBody returns body, or the placeholder when r hides it.
func redactBody(body []byte, r *delivery.Redaction) []byte {
	if r != nil && r.Body && len(body) > 0 {
		return []byte(redacted)
	}
	return body
}

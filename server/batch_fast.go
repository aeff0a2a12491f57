package server

import (
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/duraton/duraton/delivery"
)

// The step publish of every workflow step is a POST /v2/batch of one entry whose header
// map carries a dozen lower-case names: canonicalising each (an allocation apiece), a
// one-element slice per value, and encoding/json's reflection for the answer were most of
// the handler's allocations. These helpers do the same work with a fixed table and one
// buffer; anything they do not recognise takes the general path.

// knownBatchHeaders maps the lower-case names the SDKs put into batch entries to their
// canonical form. It is fixed (never grows with input); other names are canonicalised by
// textproto as before.
var knownBatchHeaders = func() map[string]string {
	names := []string{
		"Content-Type", "Upstash-Method", "Upstash-Feature-Set", "Upstash-Retries", "Upstash-Retry-Delay",
		"Upstash-Delay", "Upstash-Not-Before", "Upstash-Timeout", "Upstash-Label", "Upstash-Queue-Name",
		"Upstash-Deduplication-Id", "Upstash-Content-Based-Deduplication", "Upstash-Callback",
		"Upstash-Failure-Callback", "Upstash-Flow-Control-Key", "Upstash-Flow-Control-Value",
		"Upstash-Telemetry-Framework", "Upstash-Telemetry-Runtime", "Upstash-Telemetry-Sdk",
		"Upstash-Workflow-Init", "Upstash-Workflow-Runid", "Upstash-Workflow-Url", "Upstash-Workflow-Sdk-Version",
		"Upstash-Workflow-Calltype", "Upstash-Workflow-Failure-Callback", "Upstash-Workflow-Invoke",
		"Upstash-Workflow-Invoke-Count", "Upstash-Workflow-Concurrent", "Upstash-Workflow-Stepid",
		"Upstash-Workflow-Stepname", "Upstash-Workflow-Steptype", "Upstash-Workflow-Contenttype",
		"Upstash-Forward-Upstash-Workflow-Sdk-Version", "Upstash-Forward-Upstash-Workflow-Invoke-Count",
	}
	m := make(map[string]string, len(names))
	for _, n := range names {
		if textproto.CanonicalMIMEHeaderKey(n) != n {
			panic("knownBatchHeaders: " + n + " is not canonical")
		}
		m[strings.ToLower(n)] = n
	}
	return m
}()

// batchHeader is what http.Header.Set of every (name, value) of in makes, with the
// known names' canonical forms from the table and all values in one backing array.
func batchHeader(in map[string]string) http.Header {
	h := make(http.Header, len(in))
	vals := make([]string, len(in))
	i := 0
	for k, v := range in {
		name, ok := knownBatchHeaders[k]
		if !ok {
			name = textproto.CanonicalMIMEHeaderKey(k)
		}
		if _, dup := h[name]; dup {
			// Two spellings of one name: Set keeps the last one seen, as before.
			h[name] = []string{v}
			continue
		}
		vals[i] = v
		h[name] = vals[i : i+1 : i+1]
		i++
	}
	return h
}

// appendPublishResults appends the JSON array the batch answers with when every entry
// made one message — byte for byte what compactSerializer writes for []wire.PublishResult
// (no HTML escaping, a trailing newline). ok is false when a string needs escaping; the
// caller then uses the serializer.
func appendPublishResults(buf []byte, res []delivery.PublishResult) (_ []byte, ok bool) {
	buf = append(buf, '[')
	for i, r := range res {
		if !plainJSONString(r.MessageID) || !plainJSONString(r.URL) {
			return buf, false
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"messageId":"`...)
		buf = append(buf, r.MessageID...)
		buf = append(buf, '"')
		if r.URL != "" {
			buf = append(buf, `,"url":"`...)
			buf = append(buf, r.URL...)
			buf = append(buf, '"')
		}
		if r.Deduplicated {
			buf = append(buf, `,"deduplicated":`...)
			buf = strconv.AppendBool(buf, true)
		}
		buf = append(buf, '}')
	}
	return append(buf, "]\n"...), true
}

// plainJSONString reports whether encoding/json writes s unchanged between quotes
// (with HTML escaping off): printable ASCII other than '"' and '\'.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

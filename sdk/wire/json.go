package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// CompactJSON encodes v as JSON.stringify does: compact, without HTML escaping and
// without a trailing newline, so bodies re-serialised by JavaScript frameworks still
// match their signature (docs/protocol.md, "Verifying a delivery").
func CompactJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// MustCompactJSON is CompactJSON for values that always encode (plain data types of this
// package, maps of them); it panics otherwise, a programming error.
func MustCompactJSON(v any) []byte {
	b, err := CompactJSON(v)
	if err != nil {
		panic(fmt.Sprintf("wire: encode %T: %v", v, err))
	}
	return b
}

// ErrorBody is the JSON body of every error answer of the API: {"error": "..."}.
type ErrorBody struct {
	Error string `json:"error"`
}

package wire

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestAppendJSONStringIsEncoder: for any string (quotes, backslashes, control
// characters, HTML characters, non-ASCII, invalid UTF-8), appendJSONString writes the
// bytes json.Encoder without HTML escaping writes.
func TestAppendJSONStringIsEncoder(t *testing.T) {
	t.Parallel()
	text := rapid.OneOf(rapid.String(), rapid.StringMatching(`[ -~]{0,30}`), rapid.StringMatching(`["\\a<>&]{0,8}`))
	rapid.Check(t, func(rt *rapid.T) {
		s := text.Draw(rt, "s")
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		require.NoError(rt, enc.Encode(s))
		got, err := appendJSONString([]byte("x"), s)
		require.NoError(rt, err)
		require.Equal(rt, "x"+string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))), string(got))
	})
}

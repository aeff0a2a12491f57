package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/duraton/duraton/sdk/wire"
)

// TestAppendHistoryEntryMatchesCompactJSON: the hand-built history element is byte for
// byte CompactJSON of the entry, for any ids, call types and bodies; a nil body is "".
func TestAppendHistoryEntryMatchesCompactJSON(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"messageId":"m","body":"","callType":"step"}`, string(wire.AppendHistoryEntry(nil, []byte("m"), nil, []byte("step"))))
	rapid.Check(t, func(rt *rapid.T) {
		e := wire.HistoryEntry{MessageID: rapid.String().Draw(rt, "id"), Body: rapid.SliceOf(rapid.Byte()).Draw(rt, "body"), CallType: rapid.String().Draw(rt, "callType")}
		if e.Body == nil {
			e.Body = []byte{}
		}
		got := wire.AppendHistoryEntry([]byte("x"), []byte(e.MessageID), e.Body, []byte(e.CallType))
		require.Equal(rt, "x"+string(wire.MustCompactJSON(e)), string(got))
	})
}

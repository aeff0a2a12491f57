package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/duraton/duraton/sdk/wire"
)

// TestAppendBatchJSONDecodesToTheEntries: whatever the strings (quotes, control
// characters, invalid UTF-8, HTML characters), the hand-built batch decodes to the
// entries json.Marshal would have encoded.
func TestAppendBatchJSONDecodesToTheEntries(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		entries := rapid.SliceOf(rapid.Custom(func(rt *rapid.T) wire.BatchEntry {
			return wire.BatchEntry{Destination: rapid.String().Draw(rt, "dest"),
				Headers: rapid.MapOf(rapid.String(), rapid.String()).Draw(rt, "headers"),
				Body:    rapid.String().Draw(rt, "body"), Queue: rapid.StringMatching(`[a-z]{0,3}`).Draw(rt, "queue")}
		})).Draw(rt, "entries")
		var got, want []wire.BatchEntry
		require.NoError(rt, json.Unmarshal(wire.AppendBatchJSON(nil, entries), &got))
		ref, err := json.Marshal(entries)
		require.NoError(rt, err)
		require.NoError(rt, json.Unmarshal(ref, &want))
		require.Equal(rt, want, got)
	})
}

// TestVerifyClaimsReturnsTheClaims: the claims that come back are the signed ones.
func TestVerifyClaimsReturnsTheClaims(t *testing.T) {
	t.Parallel()
	c := wire.NewClaims(testURL, []byte("b"), testNow(), "jwt_x")
	tok, err := wire.Sign(testCurrentKey, c)
	require.NoError(t, err)
	got, err := wire.Verifier{CurrentKey: testCurrentKey}.VerifyClaims(tok, []byte("b"), testURL, testNow())
	require.NoError(t, err)
	require.Equal(t, c, got)
	_, err = wire.Verifier{CurrentKey: testCurrentKey}.VerifyClaims(tok, []byte("other"), testURL, testNow())
	require.ErrorIs(t, err, wire.ErrBodyMismatch)
}

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

// stepPublish is the batch of one step as the Go SDK publishes it: its body is a step
// object, printable ASCII with quotes.
func stepPublish() []wire.BatchEntry {
	return []wire.BatchEntry{{Destination: "http://127.0.0.1:4100/wf",
		Headers: map[string]string{"upstash-workflow-runid": "wfr_bench_1", "upstash-workflow-init": "false", "upstash-workflow-url": "http://127.0.0.1:4100/wf",
			"upstash-method": "POST", "upstash-feature-set": "LazyFetch,InitialBody", "upstash-workflow-sdk-version": "1", "content-type": "application/json"},
		Body: `{"stepId":1,"stepName":"s0","stepType":"Run","out":"0","concurrent":1}`}}
}

// BenchmarkAppendBatchJSON is a step publish's request body.
func BenchmarkAppendBatchJSON(b *testing.B) {
	entries := stepPublish()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = wire.AppendBatchJSON(buf[:0], entries)
	}
}

// TestAppendBatchJSONAllocationBudget: a step publish's body is appended into a sized
// buffer without allocating (its quoted step object used to go through json.Encoder).
func TestAppendBatchJSONAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations")
	}
	entries := stepPublish()
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() { buf = wire.AppendBatchJSON(buf[:0], entries) })
	require.Zero(t, allocs)
}

package wire

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// agreesWithJSON checks that DecodeBatch gives what json.Unmarshal gives: the same
// entries, or an error with the same text.
func agreesWithJSON(t require.TestingT, raw []byte) {
	var want []BatchEntry
	wantErr := json.Unmarshal(raw, &want)
	got, err := DecodeBatch(raw)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error(), "input %q", raw)
		return
	}
	require.NoError(t, err, "input %q", raw)
	require.Equal(t, want, got, "input %q", raw)
}

// TestDecodeBatchAgreesWithEncodingJSON: on the bodies SDKs send, on odd but valid ones
// (escapes, other key spellings, nulls, unknown keys, repeated keys, whitespace) and on
// malformed ones, the fast path never differs from encoding/json.
func TestDecodeBatchAgreesWithEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`[{"destination":"http://a/b","headers":{"upstash-workflow-runid":"wfr_1","content-type":"application/json"},"body":"{\"stepId\":1}"}]`,
		`[{"destination":"http://a/b","headers":{"a":"1"},"body":"x"},{"destination":"http://c","queue":"q"}]`,
		` [ { "destination" : "d" , "body" : "b" } ] `,
		`[{"Destination":"d"}]`, `[{"destination":null}]`, `[{"destination":"d","other":1}]`, `[{"destination":"d","destination":"e"}]`,
		`[{"headers":{"a":"1"},"headers":{"b":"2"}}]`, `[{"headers":{"a":"1","a":"2"}}]`, `[{"headers":{}}]`, `[{}]`, `[]`,
		`[{"destination":"d" "body":"b"}]`, `[{"destination":"d",}]`, `[{"destination":"d"},]`, `[{"destination":"d"}] x`,
		`[{"destination":"d"}`, `[{"destination":"\u00e9\n"}]`, "[{\"destination\":\"\xff\"}]", "[{\"destination\":\"a\tb\"}]",
		`[{"headers":{"a":1}}]`, `[{"headers":{"a":"1",}}]`, `[{"headers":{"a":"1" "b":"2"}}]`, `{"destination":"d"}`, ``, `null`,
		`[{"destination":"d"},{"destination":"e"}]`, `[{"body":""}]`, `[{"queue":"q","headers":null}]`,
		// Interned names and values, whole, escaped, and as the start of a longer string.
		`[{"headers":{"upstash-workflow-init":"true","content-type":"application/json","upstash-method":"POST"}}]`,
		`[{"headers":{"upstash-workflow-init\"":"true\"","tru\u0065":"fals\u0065"}}]`,
		`[{"headers":{"true\"x":"false\\","upstash-method":"POST\n"}}]`,
		`[{"headers":{"upstash-workflow-init":"true" "x":"y"}}]`, `[{"headers":{"true":"true`,
		`[{"headers":{"upstash-workflow-init":"true","upstash-workflow-init":"false"}}]`,
	} {
		agreesWithJSON(t, []byte(raw))
	}
	rapid.Check(t, func(rt *rapid.T) {
		entries := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) BatchEntry {
			return BatchEntry{Destination: rapid.String().Draw(rt, "dest"),
				Headers: rapid.MapOf(rapid.OneOf(rapid.StringMatching(`[a-z-]{1,12}`), internedSample()),
					rapid.OneOf(rapid.String(), internedSample())).Draw(rt, "headers"),
				Body: rapid.String().Draw(rt, "body"), Queue: rapid.StringMatching(`[a-z]{0,3}`).Draw(rt, "queue")}
		}), 1, 5).Draw(rt, "entries")
		raw, err := json.Marshal(entries)
		require.NoError(rt, err)
		agreesWithJSON(rt, raw)
		// And with one byte changed, cut or dropped: valid or not, the same answer.
		if len(raw) > 0 {
			i := rapid.IntRange(0, len(raw)-1).Draw(rt, "at")
			mutated := append([]byte(nil), raw...)
			switch rapid.IntRange(0, 2).Draw(rt, "how") {
			case 0:
				mutated[i] = rapid.SampledFrom([]byte(`"{}[],: \x00\\ae`)).Draw(rt, "byte")
			case 1:
				mutated = mutated[:i]
			case 2:
				mutated = append(mutated[:i], mutated[i+1:]...)
			}
			agreesWithJSON(rt, mutated)
		}
	})
}

// BenchmarkDecodeBatch compares a step publish's batch body through encoding/json and
// through the fast path.
func BenchmarkDecodeBatch(b *testing.B) {
	raw := []byte(`[{"destination":"http://127.0.0.1:41234/wf","headers":{"upstash-workflow-init":"false","upstash-workflow-runid":"wfr_bench_1","upstash-workflow-url":"http://127.0.0.1:41234/wf","upstash-workflow-sdk-version":"1","upstash-forward-upstash-workflow-sdk-version":"1","upstash-feature-set":"LazyFetch,InitialBody,WF_DetectTrigger,WF_TriggerOnConfig","upstash-method":"POST","content-type":"application/json"},"body":"{\"concurrent\":1,\"out\":\"1\",\"stepId\":2,\"stepName\":\"s1\",\"stepType\":\"Run\"}"}]`)
	b.Run("EncodingJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e []BatchEntry
			_ = json.Unmarshal(raw, &e)
		}
	})
	b.Run("Fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = DecodeBatch(raw)
		}
	})
}

// TestDecodeBatchFastPathTakesStepPublishes: what the SDKs send takes the fast path
// (with the escapes of a step object in its body), within an allocation budget.
func TestDecodeBatchFastPathTakesStepPublishes(t *testing.T) {
	raw := []byte(`[{"destination":"http://127.0.0.1:41234/wf","headers":{"upstash-workflow-init":"false","upstash-workflow-runid":"wfr_bench_1","content-type":"application/json"},"body":"{\"concurrent\":1,\"out\":\"\\\"x\\\"\",\"stepId\":2}"}]`)
	got, ok := fastBatch(raw)
	require.True(t, ok)
	var want []BatchEntry
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Equal(t, want, got)
	allocs := testing.AllocsPerRun(100, func() { _, _ = DecodeBatch(raw) })
	// entries, the header map, the destination, the run id, the unescaped body: header
	// names and constant values are interned (intern.go) (encoding/json: 36)
	require.LessOrEqual(t, allocs, 8.0)
}

// historyAgreesWithJSON checks that DecodeHistory gives what json.Unmarshal gives.
func historyAgreesWithJSON(t require.TestingT, raw []byte) {
	var want []HistoryEntry
	wantErr := json.Unmarshal(raw, &want)
	got, err := DecodeHistory(raw)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error(), "input %q", raw)
		return
	}
	require.NoError(t, err, "input %q", raw)
	require.Equal(t, want, got, "input %q", raw)
}

// TestDecodeHistoryAgreesWithEncodingJSON: the history fast path gives encoding/json's
// answer on what Duraton sends, on odd valid input and on malformed input; and it is
// the path Duraton's deliveries take.
func TestDecodeHistoryAgreesWithEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`[{"messageId":"msg_1","body":"eyJhIjoxfQ==","callType":"step"},{"messageId":"msg_2","body":"","callType":"step"}]`,
		`[{"messageId":"m","body":"!!"}]`, `[{"messageId":"m","body":"YQ"}]`, `[{"messageId":"m"}]`, `[{"body":null}]`,
		`[{"MessageId":"m","body":"YQ=="}]`, `[{"messageId":"m","body":"YQ==","extra":1}]`, `[{"messageId":"m","body":"YQ==",}]`,
		`[{"messageId":"m","body":"YQ==","body":"Yg=="}]`, `[]`, `[{"messageId":"m","body":"YQ=="}] x`, `[{"messageId":"m","body":"Y\nQ=="}]`,
	} {
		historyAgreesWithJSON(t, []byte(raw))
	}
	rapid.Check(t, func(rt *rapid.T) {
		entries := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) HistoryEntry {
			return HistoryEntry{MessageID: rapid.String().Draw(rt, "id"), Body: rapid.SliceOf(rapid.Byte()).Draw(rt, "body"),
				CallType: rapid.SampledFrom([]string{"step", "fromCallback", "toCallback", ""}).Draw(rt, "callType")}
		}), 1, 6).Draw(rt, "entries")
		raw := []byte{'['}
		for i, e := range entries {
			if i > 0 {
				raw = append(raw, ',')
			}
			raw = AppendHistoryEntry(raw, []byte(e.MessageID), e.Body, []byte(e.CallType))
		}
		raw = append(raw, ']')
		historyAgreesWithJSON(rt, raw)
		i := rapid.IntRange(0, len(raw)-1).Draw(rt, "at")
		mutated := append([]byte(nil), raw...)
		switch rapid.IntRange(0, 2).Draw(rt, "how") {
		case 0:
			mutated[i] = rapid.SampledFrom([]byte(`"{}[],: \x00\\=A`)).Draw(rt, "byte")
		case 1:
			mutated = mutated[:i]
		case 2:
			mutated = append(mutated[:i], mutated[i+1:]...)
		}
		historyAgreesWithJSON(rt, mutated)
	})
	_, ok := fastHistory([]byte(`[{"messageId":"msg_1","body":"eyJhIjoxfQ==","callType":"step"}]`))
	require.True(t, ok)
}

// TestDecodeHistoryAllocationBudget: a 4-entry delivery body is decoded with an
// allocation per message id and per body and the entries' slice: keys are matched
// without copies and callType "step" is not copied (was 27).
func TestDecodeHistoryAllocationBudget(t *testing.T) {
	raw := []byte(`[{"messageId":"msg_1","body":"e30=","callType":"step"}`)
	for range 3 {
		raw = append(raw, `,{"messageId":"msg_2","body":"eyJzdGVwSWQiOjF9","callType":"step"}`...)
	}
	raw = append(raw, ']')
	_, ok := fastHistory(raw)
	require.True(t, ok)
	allocs := testing.AllocsPerRun(100, func() { _, _ = DecodeHistory(raw) })
	require.LessOrEqual(t, allocs, 11.0)
}

// BenchmarkDecodeHistory is a 4-entry delivery body through encoding/json and the fast
// path.
func BenchmarkDecodeHistory(b *testing.B) {
	raw := []byte(`[{"messageId":"msg_2hbE4v0kq9Qw3v8mYc1Xx7aa","body":"e30=","callType":"step"}`)
	for range 3 {
		raw = append(raw, `,{"messageId":"msg_2hbE4v0kq9Qw3v8mYc1Xx7ab","body":"eyJjb25jdXJyZW50IjoxLCJvdXQiOiIxIiwic3RlcElkIjoxLCJzdGVwTmFtZSI6InMwIiwic3RlcFR5cGUiOiJSdW4ifQ==","callType":"step"}`...)
	}
	raw = append(raw, ']')
	b.Run("EncodingJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e []HistoryEntry
			_ = json.Unmarshal(raw, &e)
		}
	})
	b.Run("Fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = DecodeHistory(raw)
		}
	})
}

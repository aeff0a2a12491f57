package server

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/duraton/duraton/sdk/wire"
)

// agreesWithJSON checks that decodeBatch gives what json.Unmarshal gives: the same
// entries, or an error with the same text.
func agreesWithJSON(t require.TestingT, raw []byte) {
	var want []wire.BatchEntry
	wantErr := json.Unmarshal(raw, &want)
	got, err := decodeBatch(raw)
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
	} {
		agreesWithJSON(t, []byte(raw))
	}
	rapid.Check(t, func(rt *rapid.T) {
		entries := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) wire.BatchEntry {
			return wire.BatchEntry{Destination: rapid.String().Draw(rt, "dest"),
				Headers: rapid.MapOf(rapid.StringMatching(`[a-z-]{1,12}`), rapid.String()).Draw(rt, "headers"),
				Body:    rapid.String().Draw(rt, "body"), Queue: rapid.StringMatching(`[a-z]{0,3}`).Draw(rt, "queue")}
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
			var e []wire.BatchEntry
			_ = json.Unmarshal(raw, &e)
		}
	})
	b.Run("Fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = decodeBatch(raw)
		}
	})
}

// TestDecodeBatchFastPathTakesStepPublishes: what the SDKs send takes the fast path
// (with the escapes of a step object in its body), within an allocation budget.
func TestDecodeBatchFastPathTakesStepPublishes(t *testing.T) {
	raw := []byte(`[{"destination":"http://127.0.0.1:41234/wf","headers":{"upstash-workflow-init":"false","upstash-workflow-runid":"wfr_bench_1","content-type":"application/json"},"body":"{\"concurrent\":1,\"out\":\"\\\"x\\\"\",\"stepId\":2}"}]`)
	got, ok := fastBatch(raw)
	require.True(t, ok)
	var want []wire.BatchEntry
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Equal(t, want, got)
	allocs := testing.AllocsPerRun(100, func() { _, _ = decodeBatch(raw) })
	require.LessOrEqual(t, allocs, 15.0) // entries, the header map, 8 strings, the unescaped body (encoding/json: 36)
}

package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// stepPublishHeaders is the header map of a step publish by @upstash/workflow 1.3.3.
var stepPublishHeaders = map[string]string{
	"content-type": "application/json", "upstash-feature-set": "LazyFetch,InitialBody,WF_DetectTrigger,WF_TriggerOnConfig",
	"upstash-forward-upstash-workflow-sdk-version": "1", "upstash-method": "POST",
	"upstash-telemetry-framework": "unknown", "upstash-telemetry-runtime": "unknown, node@v20.20.2",
	"upstash-telemetry-sdk": "@upstash/workflow@v1.3.2, upstash-qstash-js@2.12.0", "upstash-workflow-init": "false",
	"upstash-workflow-runid": "wfr_bench_0", "upstash-workflow-sdk-version": "1", "upstash-workflow-url": "http://127.0.0.1:35801/wf",
}

// setHeader is what the batch handler did before batchHeader: http.Header.Set per name.
func setHeader(in map[string]string) http.Header {
	h := make(http.Header, len(in))
	for k, v := range in {
		h.Set(k, v)
	}
	return h
}

// TestBatchHeaderIsSet: for any header map whose names are distinct once canonicalised
// (known names in any case, other tokens, names that are not tokens), batchHeader makes
// exactly what Set per name made.
func TestBatchHeaderIsSet(t *testing.T) {
	var known []string
	for k := range knownBatchHeaders {
		known = append(known, k)
	}
	name := rapid.OneOf(
		rapid.SampledFrom(known),
		rapid.Map(rapid.SampledFrom(known), strings.ToUpper),
		rapid.StringMatching(`[A-Za-z0-9-]{1,20}`),
		rapid.StringMatching(`[a-z (){}é_]{1,8}`),
	)
	rapid.Check(t, func(t *rapid.T) {
		in := map[string]string{}
		seen := map[string]bool{}
		for _, k := range rapid.SliceOfN(name, 0, 16).Draw(t, "names") {
			if c := http.CanonicalHeaderKey(k); !seen[c] {
				seen[c] = true
				in[k] = rapid.String().Draw(t, "value")
			}
		}
		require.Equal(t, setHeader(in), batchHeader(in))
	})
	require.Equal(t, setHeader(stepPublishHeaders), batchHeader(stepPublishHeaders))
}

// TestKnownBatchHeadersCoverStepPublish: every name of a TS SDK step publish is in the table
// (else the fast path silently stops being taken).
func TestKnownBatchHeadersCoverStepPublish(t *testing.T) {
	for k := range stepPublishHeaders {
		require.Contains(t, knownBatchHeaders, k)
	}
}

// TestAppendPublishResultsIsSerializer: where appendPublishResults answers, its bytes are
// compactSerializer's for the same []wire.PublishResult, and it answers whenever every
// string is printable ASCII that encoding/json leaves as it is (message ids and URLs).
func TestAppendPublishResultsIsSerializer(t *testing.T) {
	str := rapid.OneOf(rapid.StringMatching(`[ -~]{0,30}`), rapid.String())
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(t, "n")
		res := make([]delivery.PublishResult, n)
		want := make([]wire.PublishResult, n)
		plain := true
		for i := range res {
			res[i] = delivery.PublishResult{MessageID: str.Draw(t, "id"), URL: str.Draw(t, "url"), Deduplicated: rapid.Bool().Draw(t, "dedup")}
			want[i] = toPublishResponse(res[i])
			plain = plain && printableASCII(res[i].MessageID) && quotedUnchanged(res[i].MessageID) &&
				printableASCII(res[i].URL) && quotedUnchanged(res[i].URL)
		}
		got, ok := appendPublishResults(nil, res)
		if plain {
			require.True(t, ok, "printable ASCII that needs no escaping must take the fast path")
		}
		if !ok {
			return
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(want))
		require.Equal(t, buf.String(), string(got))
	})
}

func printableASCII(s string) bool {
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			return false
		}
	}
	return true
}

// quotedUnchanged reports whether encoding/json (HTML escaping off) writes s as "s".
func quotedUnchanged(s string) bool {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return buf.String() == `"`+s+`"`+"\n"
}

// TestBatchFastPathAllocationBudget: a step publish's header map and answer stay at their
// allocation counts (Set per name made 26 for these 11 names, encoding/json 3 for the answer).
func TestBatchFastPathAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	hdr := testing.AllocsPerRun(200, func() { _ = batchHeader(stepPublishHeaders) })
	require.LessOrEqual(t, hdr, 5.0, "batchHeader allocations")
	res := []delivery.PublishResult{{MessageID: "msg_18ece6d00cfcf327296ae337", URL: "http://127.0.0.1:35801/wf"}}
	buf := make([]byte, 0, 128)
	ans := testing.AllocsPerRun(200, func() { _, _ = appendPublishResults(buf[:0], res) })
	require.Zero(t, ans, "appendPublishResults allocations into a sized buffer")
}

func BenchmarkBatchHeader(b *testing.B) {
	b.Run("Set", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = setHeader(stepPublishHeaders)
		}
	})
	b.Run("batchHeader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = batchHeader(stepPublishHeaders)
		}
	})
}

func BenchmarkPublishAnswer(b *testing.B) {
	res := []delivery.PublishResult{{MessageID: "msg_18ece6d00cfcf327296ae337", URL: "http://127.0.0.1:35801/wf"}}
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode([]any{toPublishResponse(res[0])})
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = appendPublishResults(make([]byte, 0, 96*len(res)), res)
		}
	})
}

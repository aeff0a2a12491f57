package delivery

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestKeptResponseHeaderLimits(t *testing.T) {
	h := http.Header{"Connection": {"close"}, "Zz-Upstash": {"x"}}
	for i := range 200 {
		h.Set(fmt.Sprintf("X-A-%03d", i), strings.Repeat("v", 100))
	}
	h.Set("X-Huge", strings.Repeat("h", 20<<10))
	h.Set("Upstash-Workflow-Sdk-Version", "1") // sorts after X-A-*, kept first anyway
	kept := keptResponseHeader(h)
	require.Len(t, kept, MaxStoredResponseHeaders)
	require.Equal(t, "1", kept.Get("Upstash-Workflow-Sdk-Version"), "protocol headers come first")
	require.Contains(t, kept, "Connection", "hop-by-hop headers are reported as received")
	require.NotContains(t, kept, "X-Huge", "a header over the byte limit is left out whole")
	n := 0
	for k, vs := range kept {
		n += len(k) + len(vs[0])
	}
	require.LessOrEqual(t, n, MaxStoredResponseHeaderBytes)
	require.True(t, answeredBySDK(kept))
}

// Within the limits, the fast path keeps what the priority path keeps; over them it
// steps aside.
func TestKeptResponseHeaderFastPathAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := http.Header{}
		n := rapid.IntRange(0, MaxStoredResponseHeaders+8).Draw(t, "headers")
		for i := range n {
			name := rapid.SampledFrom([]string{"Connection", "Keep-Alive", "Upstash-Workflow-Sdk-Version", "Content-Type"}).Draw(t, "known")
			if rapid.Bool().Draw(t, "custom") {
				name = fmt.Sprintf("X-H-%d", i)
			}
			h[name] = []string{strings.Repeat("v", rapid.IntRange(0, 600).Draw(t, "len"))}
		}
		whole, ok := keptWhole(h)
		if !ok {
			return
		}
		require.Equal(t, keptByPriority(h), whole)
	})
}

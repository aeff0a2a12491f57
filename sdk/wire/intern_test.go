package wire

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// internedNames are the header names internedHeaderString knows, built here the way the
// SDKs build them (lower-cased; a failure callback's nested names as the Go SDK's
// nestedHeader does), so that a renamed constant shows up as a miss here.
func internedNames() []string {
	nested := func(name string) string {
		return strings.ToLower(PrefixFailureCallback + strings.TrimPrefix(name, "Upstash-"))
	}
	return []string{
		strings.ToLower(HeaderWorkflowInit), strings.ToLower(HeaderWorkflowRunID), strings.ToLower(HeaderWorkflowURL),
		strings.ToLower(HeaderWorkflowSdkVersion), strings.ToLower(PrefixForward + HeaderWorkflowSdkVersion),
		strings.ToLower(HeaderFeatureSet), strings.ToLower(HeaderMethod), strings.ToLower(HeaderContentType),
		strings.ToLower(HeaderWorkflowCallType), strings.ToLower(HeaderFailureCallback),
		nested(PrefixForward + PrefixWorkflow + "Is-Failure"), nested(PrefixForward + HeaderWorkflowFailureCallback),
		nested(HeaderWorkflowRunID), nested(HeaderWorkflowInit), nested(HeaderWorkflowURL),
		nested(HeaderWorkflowCallType), nested(HeaderFeatureSet),
	}
}

var internedValues = []string{"true", "false", SdkVersion, FeatureSet, http.MethodPost, "application/json", CallTypeStep, CallTypeFailure}

func TestInternedHeaderStrings(t *testing.T) {
	for _, s := range append(internedNames(), internedValues...) {
		got, ok := internedHeaderString([]byte(s))
		require.True(t, ok, "%q is interned", s)
		require.Equal(t, s, got)
		// headerStr relies on this: the text up to the next quote is an interned string
		// only if it is the whole JSON string, unescaped.
		require.False(t, strings.ContainsAny(s, "\\\"") || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 }),
			"%q has no quote, backslash or control character", s)
	}
	for _, s := range []string{"", "True", "upstash-workflow-init ", "upstash-workflow-ini", "x"} {
		_, ok := internedHeaderString([]byte(s))
		require.False(t, ok, "%q is not interned", s)
	}
}

// internedSample draws an interned string, or one that starts like one and goes on.
func internedSample() *rapid.Generator[string] {
	all := append(internedNames(), internedValues...)
	return rapid.Custom(func(t *rapid.T) string {
		s := rapid.SampledFrom(all).Draw(t, "interned")
		return s + rapid.SampledFrom([]string{"", "", `"`, `\`, "\n", "x"}).Draw(t, "tail")
	})
}

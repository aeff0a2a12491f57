package sdk

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReplayCache(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	c := NewReplayCache(2)
	require.True(t, c.accept("a", now.Unix()+300, now))
	require.False(t, c.accept("a", now.Unix()+300, now), "a replay inside the lifetime")
	require.True(t, c.accept("b", now.Unix()+100, now))
	require.True(t, c.accept("c", now.Unix()+300, now), "full: the token expiring first (b) is dropped")
	require.Len(t, c.seen, 2)
	require.False(t, c.accept("a", now.Unix()+300, now), "a is still remembered")

	later := now.Add(301 * time.Second)
	require.True(t, c.accept("a", later.Unix()+300, later), "an expired token is forgotten (it no longer verifies anyway)")
	require.Len(t, c.seen, 1)
}

// TestSameURLOfItself: for equal strings the shortcut answers what the full comparison
// answers (true exactly when the URL parses).
func TestSameURLOfItself(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://127.0.0.1:4100/wf", "https://A.example:443/a%2Fb?y=2&x=1", "http://h", "/relative", "",
		"http://[::1", "http://h/%zz", "http://h:port/", "http://h/\x7f", " http://h"} {
		_, err := url.Parse(u)
		require.Equal(t, equivalentURLs(u, u), sameURL(u, u), "%q", u)
		require.Equal(t, err == nil, sameURL(u, u), "%q", u)
	}
}

// BenchmarkSameURL is the subject check of every delivery: the signed URL is the one the
// request arrived at.
func BenchmarkSameURL(b *testing.B) {
	u := "http://127.0.0.1:41234/wf"
	b.Run("Full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			equivalentURLs(u, u)
		}
	})
	b.Run("Equal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sameURL(u, u)
		}
	})
}

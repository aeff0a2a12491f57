package storage

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Ids of one generator strictly increase and stay unique across many refills of its
// random pool, made at the same instant or not.
func TestIDGenOrderedAndUnique(t *testing.T) {
	t.Parallel()
	var g IDGen
	now := time.Unix(1_700_000_000, 0)
	seen := map[string]bool{}
	suffixes := map[string]bool{}
	prev := ""
	for i := range 10_000 {
		at := now
		if i%3 == 0 {
			at = now.Add(time.Duration(i) * time.Millisecond)
		}
		id := g.New(PrefixMessage, at)
		require.Greater(t, id, prev)
		require.False(t, seen[id])
		seen[id], prev = true, id
		suffixes[id[len(id)-8:]] = true
	}
	require.Greater(t, len(suffixes), 9_900, "the random part varies")
}

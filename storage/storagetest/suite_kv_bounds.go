package storagetest

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/duraton/duraton/storage/kv"
	"github.com/stretchr/testify/require"
)

// kvBoundTests are the engine seam's tests of its limits, run by ExerciseKV.
var kvBoundTests = map[string]func(*testing.T, kv.Engine){
	// Keys of MaxKeyBytes work on every engine (random bytes: nothing compresses them);
	// a key over the engine's limit is refused by Put itself, not at commit, so the
	// transaction goes on and commits its other writes.
	"KeyBounds": func(t *testing.T, e kv.Engine) {
		longest := make([]byte, kv.MaxKeyBytes)
		_, _ = rand.Read(longest)
		kvUpdate(t, e, "dedup", func(b kv.Bucket) error {
			if err := b.Put(longest, []byte("v")); err != nil {
				return err
			}
			require.Error(t, b.Put(bytes.Repeat([]byte("k"), 40_000), []byte("v")), "a key over every engine's limit")
			return b.Put([]byte("after"), []byte("a"))
		})
		kvView(t, e, "dedup", func(b kv.Bucket) error {
			require.Equal(t, []byte("v"), b.Get(longest))
			require.Equal(t, []byte("a"), b.Get([]byte("after")))
			return nil
		})
	},
}

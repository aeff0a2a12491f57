package walkv_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/internal/walkv"
	"github.com/duraton/duraton/storage/kv"
	"github.com/duraton/duraton/storage/storagetest"
)

// The engine seam's shared tests on the write-ahead-logged engine, with checkpoints every
// few KiB of log: reads cross all three layers (the overlay, the one being checkpointed,
// bbolt).
func TestSuiteKV(t *testing.T) {
	t.Parallel()
	for _, size := range []int64{1 << 10, 64 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			storagetest.ExerciseKV(t, func(t *testing.T) kv.Engine {
				e, err := walkv.OpenForTest(t.TempDir(), size)
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, e.Close()) })
				return e
			})
		})
	}
}

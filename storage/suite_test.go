package storage_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/kv"
	"github.com/duraton/duraton/storage/storagetest"
)

// The storage behaviour suite on bbolt (storage/pg/suite_test.go runs it on PostgreSQL).
func TestSuite(t *testing.T) {
	t.Parallel()
	storagetest.Exercise(t, func(t *testing.T) *storage.Store {
		s, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	})
}

// The engine seam's tests on bbolt.
func TestSuiteKV(t *testing.T) {
	t.Parallel()
	storagetest.ExerciseKV(t, func(t *testing.T) kv.Engine {
		e, err := storage.OpenBoltEngineForTest(t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, e.Close()) })
		return e
	})
}

// The same suites with checkpoints every few KiB of log: reads cross all three layers of
// the write-ahead-logged engine (the overlay, the one being checkpointed, bbolt).
func TestSuiteSmallCheckpoints(t *testing.T) {
	t.Parallel()
	storagetest.Exercise(t, func(t *testing.T) *storage.Store {
		s, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{CheckpointBytes: 4 << 10})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	})
}

func TestSuiteKVWAL(t *testing.T) {
	t.Parallel()
	for _, size := range []int64{1 << 10, 64 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			storagetest.ExerciseKV(t, func(t *testing.T) kv.Engine {
				e, err := storage.OpenWALEngineForTest(t.TempDir(), size)
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, e.Close()) })
				return e
			})
		})
	}
}

package storage_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/storagetest"
)

// The storage behaviour suite on the embedded engine (storage/pg/suite_test.go runs it on
// PostgreSQL; the engine seam's suite, ExerciseKV, runs in each engine's package).
func TestSuite(t *testing.T) {
	t.Parallel()
	storagetest.Exercise(t, func(t *testing.T) *storage.Store {
		s, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	})
}

// The same suite with checkpoints every few KiB of log: reads cross all three layers of
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

package storage_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
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
	storagetest.ExerciseKV(t, func(t *testing.T) storage.Engine {
		e, err := storage.OpenBoltEngineForTest(t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, e.Close()) })
		return e
	})
}

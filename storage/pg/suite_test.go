package pg_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg/pgtest"
	"github.com/duraton/duraton/storage/storagetest"
)

// The storage behaviour suite on PostgreSQL (storage/suite_test.go runs it on bbolt),
// each subtest on a fresh database.
func TestSuite(t *testing.T) {
	storagetest.Exercise(t, func(t *testing.T) *storage.Store {
		s, err := storage.OpenEngine(openEngine(t, pgtest.Shared(t).NewDatabase(t)), storage.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	})
}

// The engine seam's tests on PostgreSQL.
func TestSuiteKV(t *testing.T) {
	storagetest.ExerciseKV(t, func(t *testing.T) storage.Engine {
		return openEngine(t, pgtest.Shared(t).NewDatabase(t))
	})
}

package pg_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
	"github.com/duraton/duraton/storage/storagetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openEngine opens the engine on a fresh database of the package's cluster.
func openEngine(t *testing.T) *pg.Engine {
	t.Helper()
	e, err := pg.Open(context.Background(), pg.Config{URL: pgtest.Shared(t).NewDatabase(t)})
	require.NoError(t, err)
	return e
}

// The storage behaviour suite on PostgreSQL (storage/suite_test.go runs it on bbolt).
func TestSuite(t *testing.T) {
	storagetest.Exercise(t, func(t *testing.T) *storage.Store {
		s, err := storage.OpenEngine(openEngine(t), storage.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	})
}

// The engine seam's tests on PostgreSQL.
func TestSuiteKV(t *testing.T) {
	storagetest.ExerciseKV(t, func(t *testing.T) storage.Engine {
		e := openEngine(t)
		t.Cleanup(func() { require.NoError(t, e.Close()) })
		return e
	})
}

package boltkv_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/duraton/duraton/storage/internal/boltkv"
	"github.com/duraton/duraton/storage/kv"
	"github.com/duraton/duraton/storage/storagetest"
)

// The engine seam's shared tests on plain bbolt (storage/internal/walkv and storage/pg
// run them on their engines; storage runs the store's suite on the embedded engine).
func TestSuiteKV(t *testing.T) {
	t.Parallel()
	storagetest.ExerciseKV(t, func(t *testing.T) kv.Engine {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "kv.db"), 0o600, nil)
		require.NoError(t, err)
		e := boltkv.New(db)
		t.Cleanup(func() { require.NoError(t, e.Close()) })
		return e
	})
}

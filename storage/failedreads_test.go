package storage

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/internal/boltkv"
	"github.com/duraton/duraton/storage/kv"
)

// failingReads is an engine whose Views, once fail is set, find no root bucket: what a
// PostgreSQL View sees after a read failed (the engine then fails the whole View).
type failingReads struct {
	kv.Engine
	fail atomic.Bool
}

func (e *failingReads) View(fn func(kv.Tx) error) error {
	return e.Engine.View(func(tx kv.Tx) error {
		if e.fail.Load() {
			return fn(noRoots{tx})
		}
		return fn(tx)
	})
}

type noRoots struct{ kv.Tx }

func (noRoots) Bucket([]byte) kv.Bucket { return nil }

// A read that failed makes a root bucket nil: the Tx methods that list or read the
// root buckets say so with an error, and nothing panics (a replica routing a request
// looks tokens up this way).
func TestFailedReadOfARootBucketIsAnError(t *testing.T) {
	db, err := boltkv.Open(filepath.Join(t.TempDir(), "d.db"), boltkv.Options{})
	require.NoError(t, err)
	eng := &failingReads{Engine: boltkv.New(db)}
	store, err := OpenEngine(eng, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	require.NoError(t, store.Update(func(tx *Tx) error {
		if err := tx.CreateProject(&Project{ID: "p1"}); err != nil {
			return err
		}
		return tx.PutToken("h1", "p1")
	}))

	eng.fail.Store(true)
	err = store.View(func(tx *Tx) error {
		_, err := tx.Projects()
		require.ErrorContains(t, err, "the projects bucket could not be read")
		_, err = tx.Tokens()
		require.ErrorContains(t, err, "the tokens bucket could not be read")
		_, err = tx.TokenProject("h1")
		require.ErrorContains(t, err, "the tokens bucket could not be read")
		require.Empty(t, tx.TokensWithPrefix("h"))
		_, err = tx.projectIDs()
		require.ErrorContains(t, err, "the projects bucket could not be read")
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, migrateSweepIndexes(eng), "no panic; the engine itself would fail the View")
}

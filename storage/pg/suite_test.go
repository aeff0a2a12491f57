package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/kv"
	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
	"github.com/duraton/duraton/storage/storagetest"
)

// The storage behaviour suite on PostgreSQL (storage/suite_test.go runs it on bbolt),
// each subtest on a fresh database: once on a plain engine and once on a leader's
// (fenced, so every write checks the lease and reads go through the value cache), and
// once on a leader's shard of a database of four.
func TestSuite(t *testing.T) {
	for name, open := range engines {
		t.Run(name, func(t *testing.T) {
			storagetest.Exercise(t, func(t *testing.T) *storage.Store {
				s, err := storage.OpenEngine(open(t), storage.Options{})
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, s.Close()) })
				return s
			})
		})
	}
}

// The engine seam's tests on PostgreSQL, plain and fenced.
func TestSuiteKV(t *testing.T) {
	for name, open := range engines {
		t.Run(name, func(t *testing.T) {
			storagetest.ExerciseKV(t, func(t *testing.T) kv.Engine { return open(t) })
		})
	}
}

var engines = map[string]func(*testing.T) *pg.Engine{
	"plain": func(t *testing.T) *pg.Engine {
		return openEngine(t, pgtest.Shared(t).NewDatabase(t))
	},
	"leader": func(t *testing.T) *pg.Engine {
		e := openEngine(t, pgtest.Shared(t).NewDatabase(t))
		// A lease far longer than the suite: the test is of the cache and the fence
		// check, not of expiry (lease_test.go covers that).
		epoch, err := e.TryLead(context.Background(), "suite", "http://suite", time.Hour, 0)
		require.NoError(t, err)
		require.Positive(t, epoch)
		e.Fence("suite", epoch)
		return e
	},
	// A leader's shard other than 0 of a sharded database: its root buckets live under
	// the shard's bucket, not at the database's root.
	"shard": func(t *testing.T) *pg.Engine {
		base := openShards(t, pgtest.Shared(t).NewDatabase(t), 4)
		e, err := base.Shard(3)
		require.NoError(t, err)
		epoch, err := e.TryLead(context.Background(), "suite", "http://suite", time.Hour, 0)
		require.NoError(t, err)
		e.Fence("suite", epoch)
		return e
	},
}

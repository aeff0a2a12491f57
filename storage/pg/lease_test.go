package pg_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/kv"
	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
)

func openEngine(t *testing.T, url string) *pg.Engine {
	t.Helper()
	e, err := pg.Open(context.Background(), pg.Config{URL: url})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

// Two replicas starting at once apply the migrations once, under the advisory lock.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := pg.Open(context.Background(), pg.Config{URL: url})
			if err == nil {
				e.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	e := openEngine(t, url)
	var n, distinct int
	require.NoError(t, e.Pool().QueryRow(context.Background(), `SELECT count(*), count(DISTINCT version) FROM duraton_schema_versions`).Scan(&n, &distinct))
	require.Equal(t, 3, n, "each migration recorded once")
	require.Equal(t, n, distinct)

	// One secret, made once, the same for every replica.
	s1, err := e.ClusterSecret(context.Background())
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f]{64}$`, s1)
	s2, err := openEngine(t, url).ClusterSecret(context.Background())
	require.NoError(t, err)
	require.Equal(t, s1, s2)
}

// The database and this process share a clock here: the measured offset is about 0, on
// a fresh pool too, whose first query also opens the connection (which alone made the
// offset read several ms).
func TestClockOffset(t *testing.T) {
	e := openEngine(t, pgtest.Shared(t).NewDatabase(t))
	off, err := e.ClockOffset(context.Background())
	require.NoError(t, err)
	t.Logf("offset %s", off)
	require.Less(t, off.Abs(), 5*time.Millisecond)
}

func TestLeaseTakeRenewExpire(t *testing.T) {
	ctx := context.Background()
	e := openEngine(t, pgtest.Shared(t).NewDatabase(t))
	const ttl, grace = 400 * time.Millisecond, 200 * time.Millisecond

	epochA, err := e.TryLead(ctx, "a", "http://a", ttl, grace)
	require.NoError(t, err)
	require.Equal(t, int64(1), epochA)
	epochB, err := e.TryLead(ctx, "b", "http://b", ttl, grace)
	require.NoError(t, err)
	require.Zero(t, epochB, "a live lease is not taken")

	l, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, pg.Leader{Holder: "a", Addr: "http://a", Epoch: 1, Live: true}, l)
	require.NoError(t, e.Renew(ctx, "a", epochA, ttl))

	// Expired but within the grace: still not taken.
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err = e.Leader(ctx)
		require.NoError(t, err)
		if !l.Live {
			break
		}
		require.True(t, time.Now().Before(deadline), "lease never expired")
		time.Sleep(20 * time.Millisecond)
	}
	expiredAt := time.Now()
	for {
		epochB, err = e.TryLead(ctx, "b", "http://b", ttl, grace)
		require.NoError(t, err)
		if epochB != 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "expired lease never taken")
		time.Sleep(20 * time.Millisecond)
	}
	// Database time decides; the local clock only brackets it (tolerance: one poll).
	require.GreaterOrEqual(t, time.Since(expiredAt), grace-50*time.Millisecond, "taken before the grace ended")
	require.Equal(t, int64(2), epochB)
	require.ErrorIs(t, e.Renew(ctx, "a", epochA, ttl), pg.ErrLeaseLost)

	// A resigned lease is free at once.
	require.NoError(t, e.Resign(ctx, "b", epochB))
	epochC, err := e.TryLead(ctx, "c", "http://c", ttl, grace)
	require.NoError(t, err)
	require.Equal(t, int64(3), epochC)
}

// A leader's writes are fenced by its epoch: after another replica took the lease, the
// old leader's transactions fail with ErrFenced and write nothing.
func TestFencedWritesAfterTakeover(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Shared(t).NewDatabase(t)
	old, other := openEngine(t, url), openEngine(t, url)
	epoch, err := old.TryLead(ctx, "old", "http://old", time.Second, 0)
	require.NoError(t, err)
	old.Fence("old", epoch)
	store, err := storage.OpenEngine(old, storage.Options{})
	require.NoError(t, err)
	require.NoError(t, store.Update(func(tx *storage.Tx) error { return tx.PutToken("h1", "p") }))

	require.NoError(t, old.Resign(ctx, "old", epoch)) // stands for an expiry
	_, err = other.TryLead(ctx, "new", "http://new", time.Second, 0)
	require.NoError(t, err)

	err = store.Update(func(tx *storage.Tx) error { return tx.PutToken("h2", "p") })
	require.ErrorIs(t, err, storage.ErrFenced)
	otherStore, err := storage.OpenEngine(other, storage.Options{})
	require.NoError(t, err)
	require.NoError(t, otherStore.View(func(tx *storage.Tx) error {
		_, err := tx.TokenProject("h1")
		require.NoError(t, err)
		_, err = tx.TokenProject("h2")
		require.ErrorIs(t, err, storage.ErrNotFound, "a fenced write must not land")
		return nil
	}))
}

// A read that fails (the connection is killed mid-transaction) fails the transaction:
// it is never "not found".
func TestFailedReadFailsTransaction(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Shared(t).NewDatabase(t)
	e, admin := openEngine(t, url), openEngine(t, url)
	store, err := storage.OpenEngine(e, storage.Options{})
	require.NoError(t, err)
	require.NoError(t, store.Update(func(tx *storage.Tx) error { return tx.PutToken("h1", "p") }))

	var sawNotFound bool
	err = store.View(func(tx *storage.Tx) error {
		// The connection of this transaction (and every other one of the database but
		// this statement's) is terminated from outside.
		_, err := admin.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`)
		require.NoError(t, err)
		_, err = tx.TokenProject("h1")
		sawNotFound = errors.Is(err, storage.ErrNotFound)
		return err
	})
	require.Error(t, err)
	require.NotErrorIs(t, err, storage.ErrNotFound, "the transaction's error is the failed read, not not-found")
	require.True(t, sawNotFound, "inside fn the read found nothing (reads cannot return errors); the transaction still failed")
}

// A resignation wakes WatchLease's channel (NOTIFY), so followers need not wait for their
// poll. The watch connects in the background: resign until one arrives.
func TestWatchLeaseWokenByResign(t *testing.T) {
	e := openEngine(t, pgtest.Shared(t).NewDatabase(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := e.WatchLease(ctx, slog.Default())
	deadline := time.Now().Add(10 * time.Second)
	for {
		epoch, err := e.TryLead(ctx, "a", "http://a", time.Minute, 0)
		require.NoError(t, err)
		require.Positive(t, epoch)
		require.NoError(t, e.Resign(ctx, "a", epoch))
		select {
		case <-wake:
			return
		case <-time.After(100 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "no wake-up from a resignation within 10 s")
	}
}

// A write whose pooled connection was killed by the server (a restart, an administrator)
// before it could commit is run again on a new connection instead of failing; on a
// leader's engine too, whose first statement is the fence check.
func TestWriteRetriedOnDeadConnection(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		e := openEngine(t, pgtest.Shared(t).NewDatabase(t))
		ctx := context.Background()
		if fenced {
			epoch, err := e.TryLead(ctx, "a", "http://a", time.Hour, 0)
			require.NoError(t, err)
			e.Fence("a", epoch)
		}
		put := func(k string) error {
			return e.Update(func(tx kv.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("b"))
				if err != nil {
					return err
				}
				return b.Put([]byte(k), []byte("v"))
			})
		}
		require.NoError(t, put("before"))
		// Every other session of this database ends, as in a server restart.
		killer, err := pgx.Connect(ctx, e.Pool().Config().ConnConfig.ConnString())
		require.NoError(t, err)
		var killed int
		require.NoError(t, killer.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&killed))
		require.NoError(t, killer.Close(ctx))
		require.Positive(t, killed, "the pool had a connection to kill")

		require.NoError(t, put("after"), "fenced=%v", fenced)
		require.NoError(t, e.View(func(tx kv.Tx) error {
			require.NotNil(t, tx.Bucket([]byte("b")).Get([]byte("after")))
			return nil
		}))
	}
}

package pg_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/kv"
	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
)

// counter counts the statements an engine sends, batched or not (n), and its round
// trips (rt: a statement alone or a batch).
type counter struct{ n, rt atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	c.rt.Add(1)
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.rt.Add(1)
	return ctx
}
func (c *counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) { c.n.Add(1) }
func (c *counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// fakeClock is a monotonic clock the test moves.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() int64              { return c.ns.Load() }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// leaderEngine opens a traced engine on url that leads with a lease of ttl.
func leaderEngine(t *testing.T, url string, ttl, viewCacheAge time.Duration) (*pg.Engine, *counter, *fakeClock) {
	t.Helper()
	ctr, clk := &counter{}, &fakeClock{}
	e, err := pg.OpenTraced(context.Background(), pg.Config{URL: url, ViewCacheAge: viewCacheAge}, ctr)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	e.SetClock(clk.now)
	epoch, err := e.TryLead(context.Background(), "r1", "http://r1", ttl, 0)
	require.NoError(t, err)
	require.Positive(t, epoch)
	e.Fence("r1", epoch)
	return e, ctr, clk
}

func put(t *testing.T, e kv.Engine, key string, v []byte) {
	t.Helper()
	require.NoError(t, e.Update(func(tx kv.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte(key), v)
	}))
}

func get(t *testing.T, e kv.Engine, key string) []byte {
	t.Helper()
	var v []byte
	require.NoError(t, e.View(func(tx kv.Tx) error {
		v = bytes.Clone(tx.Bucket([]byte("b")).Get([]byte(key)))
		return nil
	}))
	return v
}

// A leader's View reads what it wrote from its cache: no statement at all (not even a
// BEGIN); a key it never saw is read from the database.
func TestViewReadsLeaderCache(t *testing.T) {
	e, ctr, _ := leaderEngine(t, pgtest.Shared(t).NewDatabase(t), time.Hour, 0)
	put(t, e, "k", []byte("v1"))
	ctr.n.Store(0)
	require.Equal(t, []byte("v1"), get(t, e, "k"))
	require.Zero(t, ctr.n.Load(), "a View of a key the leader wrote sends no statement")

	require.Nil(t, get(t, e, "never"))
	require.Equal(t, int64(1), ctr.n.Load(), "a key the leader never wrote is read from the database, alone: no BEGIN, no ROLLBACK")

	ctr.n.Store(0)
	require.NoError(t, e.View(func(tx kv.Tx) error {
		b := tx.Bucket([]byte("b"))
		require.Nil(t, b.Get([]byte("x")))
		require.Nil(t, b.Get([]byte("y")))
		return nil
	}))
	require.Equal(t, int64(4), ctr.n.Load(), "two reads: the first alone, then BEGIN, the second, ROLLBACK")
}

// The cache is not used once the lease may be lost: after the lease's TTL by the
// replica's clock without a renewal, and at once when a renewal finds it taken over.
func TestViewCacheEndsWithTheLease(t *testing.T) {
	ctx := context.Background()
	t.Run("expired", func(t *testing.T) {
		url := pgtest.Shared(t).NewDatabase(t)
		e, ctr, clk := leaderEngine(t, url, 10*time.Second, time.Hour)
		put(t, e, "k", []byte("v1"))
		overwrite(t, url, "k", []byte("v2")) // as a next leader would, once this one's lease is over
		clk.advance(9 * time.Second)
		require.NoError(t, e.Renew(ctx, "r1", epochOf(t, e), 10*time.Second))
		clk.advance(9 * time.Second) // 18 s after the take, 9 s after the renewal
		ctr.n.Store(0)
		require.Equal(t, []byte("v1"), get(t, e, "k"), "within the renewed lease, the cache")
		require.Zero(t, ctr.n.Load())
		clk.advance(time.Second) // the renewal's TTL is over
		require.Equal(t, []byte("v2"), get(t, e, "k"), "past the lease, the database")
		require.Positive(t, ctr.n.Load())
	})

	t.Run("taken over", func(t *testing.T) {
		url := pgtest.Shared(t).NewDatabase(t)
		e, ctr, _ := leaderEngine(t, url, time.Hour, time.Hour)
		epoch := epochOf(t, e)
		put(t, e, "k", []byte("v1"))
		// Another replica takes over (here by hand: the lease is not expired) and writes.
		other := openEngine(t, url)
		_, err := other.Pool().Exec(ctx, `UPDATE duraton_shards SET holder = 'r2', epoch = epoch + 1 WHERE shard = 0`)
		require.NoError(t, err)
		overwrite(t, url, "k", []byte("v3"))
		require.ErrorIs(t, e.Renew(ctx, "r1", epoch, time.Hour), pg.ErrLeaseLost)
		ctr.n.Store(0)
		require.Equal(t, []byte("v3"), get(t, e, "k"), "a lost lease drops the cache")
		require.Positive(t, ctr.n.Load())
	})

	t.Run("fenced", func(t *testing.T) {
		url := pgtest.Shared(t).NewDatabase(t)
		e, ctr, _ := leaderEngine(t, url, time.Hour, time.Hour)
		put(t, e, "k", []byte("v1"))
		other := openEngine(t, url)
		_, err := other.Pool().Exec(ctx, `UPDATE duraton_shards SET holder = 'r3', epoch = epoch + 1 WHERE shard = 0`)
		require.NoError(t, err)
		overwrite(t, url, "k", []byte("v4"))
		require.ErrorIs(t, e.Update(func(tx kv.Tx) error { return tx.Bucket([]byte("b")).Put([]byte("x"), nil) }), kv.ErrFenced)
		ctr.n.Store(0)
		require.Equal(t, []byte("v4"), get(t, e, "k"), "a fenced write drops the cache")
		require.Positive(t, ctr.n.Load())
	})
}

// A value the leader cached is trusted by a View for Config.ViewCacheAge only: a writer
// outside the fence (`duraton tokens`) may change it.
func TestViewCacheAge(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	e, ctr, clk := leaderEngine(t, url, time.Hour, 0)
	put(t, e, "k", []byte("v1"))
	overwrite(t, url, "k", []byte("v2"))
	clk.advance(999 * time.Millisecond)
	ctr.n.Store(0)
	require.Equal(t, []byte("v1"), get(t, e, "k"))
	require.Zero(t, ctr.n.Load())
	clk.advance(2 * time.Millisecond)
	require.Equal(t, []byte("v2"), get(t, e, "k"))
}

// A View that read one key from the cache and others from the database sees one
// state, though a commit of them all runs meanwhile: the commit waits until the View's
// snapshot is set (its second statement's transaction).
func TestViewCacheAndSnapshotAgree(t *testing.T) {
	e, _, _ := leaderEngine(t, pgtest.Shared(t).NewDatabase(t), time.Hour, 0)
	big := func(c byte) []byte { return bytes.Repeat([]byte{c}, pg.MaxCachedValue+1) } // never cached
	put(t, e, "a", []byte("1"))
	put(t, e, "b", big('1'))
	put(t, e, "c", big('1'))

	var a, b, c []byte
	committed := make(chan error, 1)
	require.NoError(t, e.View(func(tx kv.Tx) error {
		bk := tx.Bucket([]byte("b"))
		a = bytes.Clone(bk.Get([]byte("a"))) // from the cache
		go func() {
			committed <- e.Update(func(tx kv.Tx) error {
				w := tx.Bucket([]byte("b"))
				if err := w.Put([]byte("a"), []byte("2")); err != nil {
					return err
				}
				if err := w.Put([]byte("c"), big('2')); err != nil {
					return err
				}
				return w.Put([]byte("b"), big('2'))
			})
		}()
		// Give the commit its chance to land first (it must not: it waits for this View).
		select {
		case err := <-committed:
			committed <- err
		case <-time.After(300 * time.Millisecond):
		}
		b = bytes.Clone(bk.Get([]byte("b"))) // from the database, alone
		c = bytes.Clone(bk.Get([]byte("c"))) // from the database, in a transaction
		return nil
	}))
	require.NoError(t, <-committed)
	require.Equal(t, []byte("1"), a)
	require.Equal(t, big('1'), b, "the View's database read is of the state its cached read was")
	require.Equal(t, big('1'), c, "and so is its second")
	require.Equal(t, []byte("2"), get(t, e, "a"))
	require.Equal(t, big('2'), get(t, e, "b"))
}

// A cursor sends the transaction's pending writes of its bucket with its query, in one
// round trip: a write transaction that puts and then scans costs that round trip and
// its COMMIT.
func TestCursorSendsWritesWithItsQuery(t *testing.T) {
	ctr := &counter{}
	e, err := pg.OpenTraced(context.Background(), pg.Config{URL: pgtest.Shared(t).NewDatabase(t)}, ctr)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	put(t, e, "a", []byte("1"))
	ctr.rt.Store(0)
	var keys []string
	require.NoError(t, e.Update(func(tx kv.Tx) error {
		b := tx.Bucket([]byte("b"))
		if err := b.Put([]byte("b"), []byte("2")); err != nil {
			return err
		}
		for k, _ := b.Cursor().First(); k != nil; k, _ = b.Cursor().Seek(append(k, 0)) {
			keys = append(keys, string(k))
		}
		return nil
	}))
	require.Equal(t, []string{"a", "b"}, keys)
	require.Equal(t, int64(1+2+1), ctr.rt.Load(), "First with the write, two Seeks, COMMIT")
}

// overwrite writes key on url's database as another process would (not through the
// leader's engine, so its cache does not know).
func overwrite(t *testing.T, url, key string, v []byte) {
	t.Helper()
	other := openEngine(t, url)
	put(t, other, key, v)
}

func epochOf(t *testing.T, e *pg.Engine) int64 {
	t.Helper()
	l, err := e.Leader(context.Background())
	require.NoError(t, err)
	return l.Epoch
}

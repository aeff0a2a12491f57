package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/kv"
	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
)

func openShards(t *testing.T, url string, n int) *pg.Engine {
	t.Helper()
	e, err := pg.Open(context.Background(), pg.Config{URL: url, Shards: n})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return e
}

// The first Open sets the count; later ones keep it, whatever they ask for.
func TestShardCountIsSetOnce(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	require.Equal(t, 8, openShards(t, url, 8).ShardCount())
	require.Equal(t, 8, openShards(t, url, 3).ShardCount())
	_, err := openShards(t, url, 8).Shard(8)
	require.ErrorContains(t, err, "no shard 8 (the database has 8)")
}

// A database holding data from before shards is shard 0 of one: nothing moves.
func TestDataFromBeforeShardsIsShardZero(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	e := openShards(t, url, 1)
	require.NoError(t, e.Update(func(tx kv.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}))
	// Forget the shards, as a database made by an older binary has none.
	_, err := e.Pool().Exec(context.Background(), `DELETE FROM duraton_shards`)
	require.NoError(t, err)
	again := openShards(t, url, 16)
	require.Equal(t, 1, again.ShardCount())
	require.NoError(t, again.View(func(tx kv.Tx) error {
		require.Equal(t, []byte("v"), tx.Bucket([]byte("b")).Get([]byte("k")))
		return nil
	}))
}

// Each shard is a store of its own, and fenced by its own lease.
func TestShardsAreApartAndFencedApart(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Shared(t).NewDatabase(t)
	e := openShards(t, url, 4)
	s1, err := e.Shard(1)
	require.NoError(t, err)
	s2, err := e.Shard(2)
	require.NoError(t, err)
	for _, s := range []*pg.Engine{s1, s2} {
		epoch, err := s.TryLead(ctx, "a", "http://a", time.Hour, 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), epoch)
		s.Fence("a", epoch)
	}
	put := func(s *pg.Engine, v string) error {
		return s.Update(func(tx kv.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte(v))
		})
	}
	require.NoError(t, put(s1, "one"))
	require.NoError(t, put(s2, "two"))
	for s, want := range map[*pg.Engine]string{s1: "one", s2: "two"} {
		require.NoError(t, s.View(func(tx kv.Tx) error {
			require.Equal(t, []byte(want), tx.Bucket([]byte("b")).Get([]byte("k")))
			return nil
		}))
	}
	require.NoError(t, e.View(func(tx kv.Tx) error {
		require.Nil(t, tx.Bucket([]byte("b")), "shard 0 sees neither")
		return nil
	}))

	// Shard 2 is taken over: its writes are fenced, shard 1's are not.
	_, err = e.Pool().Exec(ctx, `UPDATE duraton_shards SET holder = 'b', epoch = epoch + 1 WHERE shard = 2`)
	require.NoError(t, err)
	require.ErrorIs(t, put(s2, "late"), kv.ErrFenced)
	require.NoError(t, put(s1, "still"))

	leases, err := e.Leases(ctx)
	require.NoError(t, err)
	require.Len(t, leases, 4)
	require.Equal(t, pg.ShardLease{Shard: 1, Holder: "a", Addr: "http://a", Epoch: 1, Live: true}, leases[1])
	require.Equal(t, "b", leases[2].Holder)
	require.Equal(t, "", leases[0].Holder)
}

func TestShardOfIsStable(t *testing.T) {
	// Fixed values: a project's records live in its shard, so this may never change.
	require.Equal(t, 0, pg.ShardOf("default", 1))
	got := []int{pg.ShardOf("default", 16), pg.ShardOf("p1", 16), pg.ShardOf("p2", 64)}
	require.Equal(t, []int{14, 10, 39}, got)
}

func TestQuotaSharesEvenly(t *testing.T) {
	live := []string{"r-c", "r-a", "r-b"}
	none := map[string]int{}
	require.Equal(t, 6, pg.Quota(16, live, none, "r-a"))
	require.Equal(t, 5, pg.Quota(16, live, none, "r-b"))
	require.Equal(t, 5, pg.Quota(16, live, none, "r-c"))
	require.Equal(t, 0, pg.Quota(16, live, none, "r-d"))
	sum := 0
	for _, r := range live {
		sum += pg.Quota(64, live, none, r)
	}
	require.Equal(t, 64, sum)

	// The remainder stays where the shards are: one shard never moves to a newcomer.
	require.Equal(t, 1, pg.Quota(1, live, map[string]int{"r-c": 1}, "r-c"))
	require.Equal(t, 0, pg.Quota(1, live, map[string]int{"r-c": 1}, "r-a"))
	// Two replicas of 8 each and a newcomer: 6, 5, 5, the newcomer taking 5.
	held := map[string]int{"r-a": 8, "r-b": 8}
	require.Equal(t, []int{6, 5, 5}, []int{pg.Quota(16, live, held, "r-a"), pg.Quota(16, live, held, "r-b"), pg.Quota(16, live, held, "r-c")})
}

func TestMembership(t *testing.T) {
	ctx := context.Background()
	e := openShards(t, pgtest.Shared(t).NewDatabase(t), 2)
	require.NoError(t, e.Heartbeat(ctx, "r-b", "http://b", time.Hour))
	require.NoError(t, e.Heartbeat(ctx, "r-a", "http://a", 300*time.Millisecond))
	rs, err := e.Replicas(ctx)
	require.NoError(t, err)
	require.Equal(t, []pg.Replica{{ID: "r-a", Addr: "http://a", Live: true}, {ID: "r-b", Addr: "http://b", Live: true}}, rs)
	require.Eventually(t, func() bool {
		rs, err := e.Replicas(ctx)
		return err == nil && len(rs) == 2 && !rs[0].Live && rs[1].Live
	}, 5*time.Second, 20*time.Millisecond, "r-a's heartbeat expires")
	require.NoError(t, e.Leave(ctx, "r-b"))
	rs, err = e.Replicas(ctx)
	require.NoError(t, err)
	require.Len(t, rs, 1)
}

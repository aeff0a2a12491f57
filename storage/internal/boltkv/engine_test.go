package boltkv

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"
)

// The bbolt wrapper's Get and Delete run on a kept cursor instead of bbolt's own (which
// open a cursor per call). Random sequences of puts, gets, deletes and nested buckets,
// within one transaction and across commits, must give what bbolt's Get and Delete give.
func TestBoltBucketGetDeleteAsBbolt(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "kv.db"), 0o600, &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		ours, theirs := []byte{'o', byte(round), byte(round >> 8)}, []byte{'t', byte(round), byte(round >> 8)}
		// 41 keys, so that gets and deletes often meet what earlier operations made.
		key := rapid.Custom(func(t *rapid.T) []byte {
			return []byte{rapid.ByteRange('a', 'a'+40).Draw(t, "k")}
		})
		txs := rapid.IntRange(1, 3).Draw(rt, "transactions")
		for range txs {
			ops := rapid.SliceOfN(rapid.IntRange(0, 9), 1, 200).Draw(rt, "ops")
			err := db.Update(func(tx *bolt.Tx) error {
				a, err := tx.CreateBucketIfNotExists(ours)
				if err != nil {
					return err
				}
				b, err := tx.CreateBucketIfNotExists(theirs)
				if err != nil {
					return err
				}
				w := wrapBolt(a) // one wrapper for the whole transaction, as Tx keeps them
				for _, op := range ops {
					k := key.Draw(rt, "key")
					switch {
					case op < 4:
						v := rapid.SliceOfN(rapid.Byte(), 0, 600).Draw(rt, "value") // some split leaves
						require.Equal(rt, b.Put(k, v), w.Put(k, v))
					case op < 7:
						require.Equal(rt, b.Get(k), w.Get(k), "get %q", k)
					case op < 9:
						require.Equal(rt, b.Delete(k), w.Delete(k), "delete %q", k)
					default:
						_, errB := b.CreateBucket(k)
						_, errA := w.CreateBucket(k)
						require.Equal(rt, errB, errA, "create bucket %q", k)
					}
				}
				return nil
			})
			require.NoError(rt, err)
		}
		// Whatever was done, both buckets hold the same keys and values.
		require.NoError(rt, db.View(func(tx *bolt.Tx) error {
			want, got := map[string]string{}, map[string]string{}
			if err := tx.Bucket(theirs).ForEach(func(k, v []byte) error { want[string(k)] = string(v); return nil }); err != nil {
				return err
			}
			if err := tx.Bucket(ours).ForEach(func(k, v []byte) error { got[string(k)] = string(v); return nil }); err != nil {
				return err
			}
			if len(want) == 0 && len(got) == 0 {
				return nil
			}
			require.Equal(rt, want, got)
			return nil
		}))
	})
}

// Deleting a nested bucket's key fails as bbolt's Delete does.
func TestBoltBucketDeleteNestedBucketRefused(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "kv.db"), 0o600, &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("root"))
		require.NoError(t, err)
		_, err = b.CreateBucket([]byte("nested"))
		require.NoError(t, err)
		w := wrapBolt(b)
		require.Nil(t, w.Get([]byte("nested")))
		require.True(t, errors.Is(w.Delete([]byte("nested")), b.Delete([]byte("nested"))))
		require.Error(t, w.Delete([]byte("nested")))
		require.NoError(t, w.Delete([]byte("absent")))
		return nil
	}))
}

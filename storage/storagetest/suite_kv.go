package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"

	"github.com/duraton/duraton/storage/kv"
	"github.com/stretchr/testify/require"
)

// The engine seam (storage/kv) driven directly, the way Tx uses it: bbolt's model of
// nested buckets of byte-ordered keys. The buckets are named as the store names them
// ("projects" / <project> / "logs", ...), so an engine that treats some specially is
// exercised as the store exercises it.

// OpenEngine returns a fresh, empty engine for t and closes it when t ends.
type OpenEngine func(t *testing.T) kv.Engine

// ExerciseKV runs the engine seam's tests against engines made by open.
func ExerciseKV(t *testing.T, open OpenEngine) {
	all := maps.Clone(kvTests)
	maps.Copy(all, kvBoundTests) // suite_kv_bounds.go
	for _, name := range sortedKeys(all) {
		test := all[name]
		t.Run(name, func(t *testing.T) { test(t, open(t)) })
	}
}

var errRollback = errors.New("storagetest: roll back")

// kvUpdate runs fn in an Update of e on the bucket projects/p/<sub>, creating the buckets
// on the way as the store does.
func kvUpdate(t *testing.T, e kv.Engine, sub string, fn func(b kv.Bucket) error) {
	t.Helper()
	require.NoError(t, kvTry(e, sub, fn))
}

// kvTry is kvUpdate that returns the error.
func kvTry(e kv.Engine, sub string, fn func(b kv.Bucket) error) error {
	return e.Update(func(tx kv.Tx) error {
		b, err := subBucket(tx, sub, true)
		if err != nil {
			return err
		}
		return fn(b)
	})
}

func kvView(t *testing.T, e kv.Engine, sub string, fn func(b kv.Bucket) error) {
	t.Helper()
	require.NoError(t, e.View(func(tx kv.Tx) error {
		b, err := subBucket(tx, sub, false)
		if err != nil {
			return err
		}
		return fn(b)
	}))
}

// subBucket opens (or creates) projects/p/<sub>.
func subBucket(tx kv.Tx, sub string, create bool) (kv.Bucket, error) {
	if create {
		root, err := tx.CreateBucketIfNotExists([]byte("projects"))
		if err != nil {
			return nil, err
		}
		p, err := root.CreateBucketIfNotExists([]byte(projectP))
		if err != nil {
			return nil, err
		}
		return p.CreateBucketIfNotExists([]byte(sub))
	}
	root := tx.Bucket([]byte("projects"))
	if root == nil {
		return nil, errors.New("no projects bucket")
	}
	p := root.Bucket([]byte(projectP))
	if p == nil {
		return nil, errors.New("no project bucket")
	}
	b := p.Bucket([]byte(sub))
	if b == nil {
		return nil, fmt.Errorf("no %s bucket", sub)
	}
	return b, nil
}

// kvKeys are keys whose byte order differs from any text collation: NUL, high bytes, one
// a prefix of the next.
var kvKeys = [][]byte{{0x00}, {0x00, 0x00}, {0x01}, []byte("a"), []byte("a\x00"), []byte("a\x00b"), []byte("a\x01"), []byte("ab"), []byte("b"), {0x7f}, {0x80}, {0xff}, {0xff, 0xff}}

// putKeys stores kvKeys, each with a value naming it (in a shuffled order).
func putKeys(b kv.Bucket) error {
	for i := range kvKeys {
		k := kvKeys[(i*5)%len(kvKeys)]
		if err := b.Put(k, append([]byte("v:"), k...)); err != nil {
			return err
		}
	}
	return nil
}

// walk moves c with step from the first pair and returns the keys, checking each value.
func walk(t *testing.T, c kv.Cursor, first func() ([]byte, []byte), step func() ([]byte, []byte)) [][]byte {
	t.Helper()
	var out [][]byte
	for k, v := first(); k != nil; k, v = step() {
		require.Equal(t, append([]byte("v:"), k...), v, "value of %x", k)
		out = append(out, bytes.Clone(k))
		require.Less(t, len(out), 100, "the cursor does not end")
	}
	return out
}

func reversed(ks [][]byte) [][]byte {
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[len(ks)-1-i] = k
	}
	return out
}

var kvTests = map[string]func(*testing.T, kv.Engine){
	"ModelCheck": modelCheck, // suite_kvmodel.go
	// Updates called concurrently behave as if one at a time: read-modify-write
	// increments from several goroutines lose none.
	"ConcurrentUpdatesSerialise": func(t *testing.T, e kv.Engine) {
		const writers, each = 4, 25
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for range each {
					err := kvTry(e, "counter", func(b kv.Bucket) error {
						n := 0
						if v := b.Get([]byte("n")); v != nil {
							var err error
							if n, err = strconv.Atoi(string(v)); err != nil {
								return err
							}
						}
						return b.Put([]byte("n"), []byte(strconv.Itoa(n+1)))
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		kvView(t, e, "counter", func(b kv.Bucket) error {
			require.Equal(t, strconv.Itoa(writers*each), string(b.Get([]byte("n"))))
			return nil
		})
	},
	// A cursor walks keys in unsigned byte order both ways; Seek lands on the first key at
	// or after its argument; each move past an end gives nil; a cursor sees the
	// transaction's own writes and deletes.
	"CursorOrder": func(t *testing.T, e kv.Engine) {
		kvUpdate(t, e, "logs", putKeys)
		check := func(b kv.Bucket, want [][]byte) {
			c := b.Cursor()
			require.Equal(t, want, walk(t, c, c.First, c.Next))
			require.Equal(t, reversed(want), walk(t, c, c.Last, c.Prev))
			k, v := c.Seek([]byte("a\x00a"))
			require.Equal(t, []byte("a\x00b"), k)
			require.Equal(t, []byte("v:a\x00b"), v)
			k, _ = c.Prev()
			require.Equal(t, []byte("a\x00"), k)
			k, _ = c.Seek([]byte("ab"))
			require.Equal(t, []byte("ab"), k, "Seek to a stored key lands on it")
			k, _ = c.Next()
			require.Equal(t, []byte("b"), k)
			k, v = c.Seek([]byte{0xff, 0xff, 0x00})
			require.Nil(t, k, "Seek past the last key")
			require.Nil(t, v)
			k, _ = c.Last()
			require.Equal(t, []byte{0xff, 0xff}, k)
			k, _ = c.Next()
			require.Nil(t, k, "Next after the last key")
			k, _ = c.First()
			require.Equal(t, []byte{0x00}, k)
			k, _ = c.Prev()
			require.Nil(t, k, "Prev before the first key")
		}
		kvView(t, e, "logs", func(b kv.Bucket) error { check(b, kvKeys); return nil })

		// The same in the writing transaction, over its own writes and deletes (then
		// rolled back: a later read sees the committed keys only).
		err := kvTry(e, "logs", func(b kv.Bucket) error {
			check(b, kvKeys)
			if err := b.Delete([]byte("a\x00")); err != nil {
				return err
			}
			if err := b.Put([]byte("a\x00a"), []byte("v:a\x00a")); err != nil {
				return err
			}
			if err := b.Put([]byte{0xfe}, []byte{'v', ':', 0xfe}); err != nil {
				return err
			}
			c := b.Cursor()
			got := walk(t, c, c.First, c.Next)
			require.Equal(t, [][]byte{{0x00}, {0x00, 0x00}, {0x01}, []byte("a"), []byte("a\x00a"), []byte("a\x00b"), []byte("a\x01"), []byte("ab"), []byte("b"), {0x7f}, {0x80}, {0xfe}, {0xff}, {0xff, 0xff}}, got)
			require.Equal(t, reversed(got), walk(t, c, c.Last, c.Prev))
			k, _ := c.Seek([]byte("a\x00"))
			require.Equal(t, []byte("a\x00a"), k, "Seek skips a key deleted in the transaction")
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		kvView(t, e, "logs", func(b kv.Bucket) error { check(b, kvKeys); return nil })
		// An empty bucket.
		kvUpdate(t, e, "dlq", func(b kv.Bucket) error {
			c := b.Cursor()
			for _, move := range []func() ([]byte, []byte){c.First, c.Last, func() ([]byte, []byte) { return c.Seek([]byte("a")) }} {
				k, v := move()
				require.Nil(t, k)
				require.Nil(t, v)
			}
			return nil
		})
	},
	// Deleting under a cursor while walking, as the sweeps do: re-seek after each
	// delete (deletePrefix, the rate log), First after each delete (retention), and a
	// bucket Delete of the key the cursor is on (gate prefixes).
	"DeleteWhileWalking": func(t *testing.T, e kv.Engine) {
		kvUpdate(t, e, "rundata", putKeys)
		kvUpdate(t, e, "rundata", func(b kv.Bucket) error {
			prefix := []byte("a\x00")
			c := b.Cursor()
			n := 0
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
				if err := c.Delete(); err != nil {
					return err
				}
				n++
				require.Less(t, n, 10)
			}
			require.Equal(t, 2, n)
			n = 0
			for k, _ := c.First(); k != nil && string(k) < "a"; k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
				n++
				require.Less(t, n, 10)
			}
			require.Equal(t, 3, n)
			p := []byte{0xff}
			for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Seek(p) {
				if err := b.Delete(k); err != nil {
					return err
				}
				n++
				require.Less(t, n, 10)
			}
			require.Equal(t, 5, n)
			return nil
		})
		want := [][]byte{[]byte("a"), []byte("a\x01"), []byte("ab"), []byte("b"), {0x7f}, {0x80}}
		kvView(t, e, "rundata", func(b kv.Bucket) error {
			c := b.Cursor()
			require.Equal(t, want, walk(t, c, c.First, c.Next))
			require.Equal(t, len(want), b.KeyCount())
			return nil
		})
		// Deleting everything through a cursor leaves an empty bucket.
		kvUpdate(t, e, "rundata", func(b kv.Bucket) error {
			c := b.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
			}
			k, _ := c.Last()
			require.Nil(t, k)
			require.Zero(t, b.KeyCount())
			return nil
		})
	},
	// Get sees a Put and a Delete of the same transaction at once; a later transaction
	// sees what committed; a rolled-back one leaves nothing, its buckets included.
	"TransactionVisibility": func(t *testing.T, e kv.Engine) {
		kvUpdate(t, e, "messages", func(b kv.Bucket) error {
			require.Nil(t, b.Get([]byte("k")))
			if err := b.Put([]byte("k"), []byte("v1")); err != nil {
				return err
			}
			require.Equal(t, []byte("v1"), b.Get([]byte("k")))
			if err := b.Put([]byte("k"), []byte("v2")); err != nil {
				return err
			}
			require.Equal(t, []byte("v2"), b.Get([]byte("k")), "the last Put wins")
			if err := b.Put([]byte("gone"), []byte("x")); err != nil {
				return err
			}
			if err := b.Delete([]byte("gone")); err != nil {
				return err
			}
			require.Nil(t, b.Get([]byte("gone")))
			return b.Delete([]byte("never-there"))
		})
		kvView(t, e, "messages", func(b kv.Bucket) error {
			require.Equal(t, []byte("v2"), b.Get([]byte("k")))
			require.Nil(t, b.Get([]byte("gone")))
			return nil
		})
		err := e.Update(func(tx kv.Tx) error {
			b, err := subBucket(tx, "messages", false)
			if err != nil {
				return err
			}
			if err := b.Put([]byte("k"), []byte("v3")); err != nil {
				return err
			}
			if err := b.Put([]byte("new"), []byte("n")); err != nil {
				return err
			}
			if err := b.Delete([]byte("k")); err != nil {
				return err
			}
			if _, err := tx.CreateBucketIfNotExists([]byte("rolledback")); err != nil {
				return err
			}
			p := tx.Bucket([]byte("projects")).Bucket([]byte(projectP))
			if _, err := p.CreateBucket([]byte("rolledback-sub")); err != nil {
				return err
			}
			return errRollback
		})
		require.ErrorIs(t, err, errRollback, "Update returns fn's error")
		require.NoError(t, e.View(func(tx kv.Tx) error {
			require.Nil(t, tx.Bucket([]byte("rolledback")), "a bucket created in a rolled-back transaction")
			p := tx.Bucket([]byte("projects")).Bucket([]byte(projectP))
			require.Nil(t, p.Bucket([]byte("rolledback-sub")))
			b := p.Bucket([]byte("messages"))
			require.Equal(t, []byte("v2"), b.Get([]byte("k")))
			require.Nil(t, b.Get([]byte("new")))
			return nil
		}))
		// The bucket names of the rolled-back transaction are free: created again, they
		// take keys that a later transaction reads.
		require.NoError(t, e.Update(func(tx kv.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("rolledback"))
			if err != nil {
				return err
			}
			if err := b.Put([]byte("k"), []byte("root")); err != nil {
				return err
			}
			sub, err := tx.Bucket([]byte("projects")).Bucket([]byte(projectP)).CreateBucket([]byte("rolledback-sub"))
			if err != nil {
				return err
			}
			return sub.Put([]byte("k"), []byte("sub"))
		}))
		require.NoError(t, e.View(func(tx kv.Tx) error {
			require.Equal(t, []byte("root"), tx.Bucket([]byte("rolledback")).Get([]byte("k")))
			require.Equal(t, []byte("sub"), tx.Bucket([]byte("projects")).Bucket([]byte(projectP)).Bucket([]byte("rolledback-sub")).Get([]byte("k")))
			return nil
		}))
		// A large value and a binary one come back byte for byte.
		big := bytes.Repeat([]byte{0x00, 0xff, 'x', 0x80}, 1<<18) // 1 MiB
		kvUpdate(t, e, "messages", func(b kv.Bucket) error { return b.Put([]byte("big"), big) })
		kvView(t, e, "messages", func(b kv.Bucket) error {
			require.True(t, bytes.Equal(big, b.Get([]byte("big"))))
			return nil
		})
	},
	// Nested buckets: created once, found again, listed in order apart from keys, never
	// read as keys; KeyCount counts keys only, the transaction's own writes included.
	"NestedBuckets": func(t *testing.T, e kv.Engine) {
		require.NoError(t, e.Update(func(tx kv.Tx) error {
			require.Nil(t, tx.Bucket([]byte("projects")))
			root, err := tx.CreateBucketIfNotExists([]byte("projects"))
			if err != nil {
				return err
			}
			again, err := tx.CreateBucketIfNotExists([]byte("projects"))
			if err != nil {
				return err
			}
			require.NotNil(t, again)
			for _, id := range []string{"p2", "p1", "p10"} {
				p, err := root.CreateBucket([]byte(id))
				if err != nil {
					return err
				}
				if _, err := p.CreateBucket([]byte("meta")); err != nil {
					return err
				}
			}
			_, err = root.CreateBucket([]byte("p1"))
			require.Error(t, err, "CreateBucket of an existing bucket")
			p1 := root.Bucket([]byte("p1"))
			require.NotNil(t, p1)
			meta, err := p1.CreateBucketIfNotExists([]byte("meta"))
			if err != nil {
				return err
			}
			if err := meta.Put([]byte("project"), []byte("one")); err != nil {
				return err
			}
			// Keys beside buckets in one bucket.
			if err := p1.Put([]byte("a-key"), []byte("1")); err != nil {
				return err
			}
			if err := p1.Put([]byte("z-key"), []byte("2")); err != nil {
				return err
			}
			require.Equal(t, 2, p1.KeyCount(), "keys written in this transaction, not the nested bucket")
			require.Nil(t, p1.Get([]byte("meta")), "a nested bucket is not a key")
			require.Nil(t, root.Bucket([]byte("p3")))
			require.Nil(t, p1.Bucket([]byte("a-key")), "a key is not a bucket")
			return nil
		}))
		require.NoError(t, e.View(func(tx kv.Tx) error {
			root := tx.Bucket([]byte("projects"))
			var names []string
			require.NoError(t, root.ForEachBucket(func(name []byte) error { names = append(names, string(name)); return nil }))
			require.Equal(t, []string{"p1", "p10", "p2"}, names)
			p1 := root.Bucket([]byte("p1"))
			names = names[:0]
			require.NoError(t, p1.ForEachBucket(func(name []byte) error { names = append(names, string(name)); return nil }))
			require.Equal(t, []string{"meta"}, names, "ForEachBucket lists buckets, not keys")
			var keys []string
			require.NoError(t, p1.ForEach(func(k, v []byte) error {
				if v != nil {
					keys = append(keys, string(k)+"="+string(v))
				} else {
					require.NotNil(t, p1.Bucket(k), "ForEach gave %q a nil value and it is no bucket", k)
				}
				return nil
			}))
			require.Equal(t, []string{"a-key=1", "z-key=2"}, keys)
			require.Equal(t, 2, p1.KeyCount())
			require.Equal(t, []byte("one"), p1.Bucket([]byte("meta")).Get([]byte("project")))
			require.Nil(t, root.Bucket([]byte("p2")).Bucket([]byte("meta")).Get([]byte("project")), "buckets of one name under two parents are apart")
			return nil
		}))
		// A bucket created by an earlier transaction takes keys in a later one.
		require.NoError(t, e.Update(func(tx kv.Tx) error {
			p2 := tx.Bucket([]byte("projects")).Bucket([]byte("p2"))
			return p2.Bucket([]byte("meta")).Put([]byte("project"), []byte("two"))
		}))
		require.NoError(t, e.View(func(tx kv.Tx) error {
			require.Equal(t, []byte("two"), tx.Bucket([]byte("projects")).Bucket([]byte("p2")).Bucket([]byte("meta")).Get([]byte("project")))
			return nil
		}))
	},
	// ForEach visits keys in order, keys with empty values included (the rate log and the
	// run index store nothing but keys); an error from fn stops it and is returned.
	"ForEachAndEmptyValues": func(t *testing.T, e kv.Engine) {
		kvUpdate(t, e, "ratelog", func(b kv.Bucket) error {
			for _, k := range []string{"k\x00\x02", "k\x00\x01", "j"} {
				if err := b.Put([]byte(k), nil); err != nil {
					return err
				}
			}
			require.Equal(t, 3, b.KeyCount())
			return b.Put([]byte("x"), []byte{})
		})
		kvView(t, e, "ratelog", func(b kv.Bucket) error {
			var keys []string
			require.NoError(t, b.ForEach(func(k, v []byte) error {
				require.Empty(t, v)
				keys = append(keys, string(k))
				return nil
			}))
			require.Equal(t, []string{"j", "k\x00\x01", "k\x00\x02", "x"}, keys)
			require.Equal(t, 4, b.KeyCount())
			c := b.Cursor()
			k, v := c.Seek([]byte("k\x00"))
			require.Equal(t, []byte("k\x00\x01"), k)
			require.Empty(t, v)
			stop := errors.New("stop")
			n := 0
			require.ErrorIs(t, b.ForEach(func([]byte, []byte) error { n++; return stop }), stop)
			require.Equal(t, 1, n)
			return nil
		})
	},
}

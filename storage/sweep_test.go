package storage

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/duraton/duraton/storage/kv"
	"github.com/stretchr/testify/require"
)

// readCounter counts the records a transaction reads: Gets and cursor moves that land
// on a key.
type readCounter struct{ n int }

type countedTx struct {
	kv.Tx
	c *readCounter
}

func (t countedTx) Bucket(name []byte) kv.Bucket { return t.c.wrap(t.Tx.Bucket(name)) }

func (c *readCounter) wrap(b kv.Bucket) kv.Bucket {
	if b == nil {
		return nil
	}
	return countedBucket{kvBucket: b, c: c}
}

type countedBucket struct {
	kvBucket
	c *readCounter
}

func (b countedBucket) Bucket(name []byte) kv.Bucket { return b.c.wrap(b.kvBucket.Bucket(name)) }
func (b countedBucket) ForEach(fn func(k, v []byte) error) error {
	return b.kvBucket.ForEach(func(k, v []byte) error { b.c.n++; return fn(k, v) })
}
func (b countedBucket) Get(k []byte) []byte {
	b.c.n++
	return b.kvBucket.Get(k)
}
func (b countedBucket) Cursor() kv.Cursor {
	return countedCursor{kvCursor: b.kvBucket.Cursor(), c: b.c}
}

type countedCursor struct {
	kvCursor
	c *readCounter
}

func (c countedCursor) count(k, v []byte) ([]byte, []byte) {
	if k != nil {
		c.c.n++
	}
	return k, v
}
func (c countedCursor) First() ([]byte, []byte)        { return c.count(c.kvCursor.First()) }
func (c countedCursor) Next() ([]byte, []byte)         { return c.count(c.kvCursor.Next()) }
func (c countedCursor) Seek(s []byte) ([]byte, []byte) { return c.count(c.kvCursor.Seek(s)) }

// The dedup sweep reads what expired, not the whole bucket: with 3,000 valid records
// and 2 expired, it reads a handful of keys. A record it reaches that cannot be decoded
// is an error, not skipped.
func TestDedupSweepReadsOnlyWhatExpired(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "d.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Update(func(tx *Tx) error {
		if err := tx.CreateProject(&Project{ID: "p"}); err != nil {
			return err
		}
		for i := range 3000 {
			if err := tx.PutDedup("p", fmt.Sprintf("d%04d", i), &DedupRecord{ExpiresAt: 2000}); err != nil {
				return err
			}
		}
		for _, id := range []string{"x1", "x2"} {
			if err := tx.PutDedup("p", id, &DedupRecord{ExpiresAt: 10}); err != nil {
				return err
			}
		}
		return nil
	}))
	var reads readCounter
	var n int
	require.NoError(t, s.engine.Update(func(ktx kv.Tx) (err error) {
		n, err = (&Tx{tx: countedTx{Tx: ktx, c: &reads}}).DeleteExpiredDedup("p", 1000, 100)
		return err
	}))
	require.Equal(t, 2, n)
	require.Less(t, reads.n, 20, "records read to sweep 2 of 3,002")

	// A damaged record the sweep reaches is reported.
	require.NoError(t, s.Update(func(tx *Tx) error {
		if err := tx.PutDedup("p", "bad", &DedupRecord{ExpiresAt: 10}); err != nil {
			return err
		}
		b, err := tx.writeBucket("p", bucketDedup)
		if err != nil {
			return err
		}
		return b.Put([]byte("bad"), []byte("{not json"))
	}))
	err = s.Update(func(tx *Tx) error {
		_, err := tx.DeleteExpiredDedup("p", 1000, 100)
		return err
	})
	require.ErrorContains(t, err, `dedup record "bad"`)
}

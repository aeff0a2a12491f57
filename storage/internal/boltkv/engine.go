package boltkv

import (
	"bytes"

	"github.com/duraton/duraton/storage/kv"
	bolt "go.etcd.io/bbolt"
)

// bbolt behind the engine seam (storage/kv). The wrappers are thin: a bucket is wrapped
// once per transaction (storage's Tx caches what it opens) and cursors are bbolt's own.

// New is db behind the engine seam: its transactions are bbolt's, its Close closes db.
func New(db *bolt.DB) kv.Engine { return boltEngine{db} }

type boltEngine struct{ db *bolt.DB }

func (e boltEngine) View(fn func(kv.Tx) error) error {
	return e.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (e boltEngine) Update(fn func(kv.Tx) error) error {
	return e.db.Update(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (e boltEngine) Close() error { return e.db.Close() }

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) Bucket(name []byte) kv.Bucket { return wrapBolt(t.tx.Bucket(name)) }

func (t boltTx) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	b, err := t.tx.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, err
	}
	return wrapBolt(b), nil
}

// wrapBolt wraps b, keeping nil a nil interface. A bucket of a write transaction keeps
// a cursor for its point reads and deletes (boltWriteBucket); a read transaction's is a
// plain value, which costs no allocation.
func wrapBolt(b *bolt.Bucket) kv.Bucket {
	switch {
	case b == nil:
		return nil
	case b.Writable():
		return &boltWriteBucket{boltBucket: boltBucket{b}}
	default:
		return boltBucket{b}
	}
}

type boltBucket struct{ b *bolt.Bucket }

func (b boltBucket) Get(key []byte) []byte        { return b.b.Get(key) }
func (b boltBucket) Put(key, value []byte) error  { return b.b.Put(key, value) }
func (b boltBucket) Delete(key []byte) error      { return b.b.Delete(key) }
func (b boltBucket) Cursor() kv.Cursor            { return b.b.Cursor() }
func (b boltBucket) Bucket(name []byte) kv.Bucket { return wrapBolt(b.b.Bucket(name)) }
func (b boltBucket) ForEach(fn func(k, v []byte) error) error {
	return b.b.ForEach(fn)
}
func (b boltBucket) ForEachBucket(fn func(name []byte) error) error {
	return b.b.ForEachBucket(fn)
}

// boltWriteBucket is a bucket of a write transaction. Tx keeps the buckets it opens for
// the whole group commit, so dozens of operations read and delete through one wrapper.
// bbolt's Get and Delete open a new Cursor each, whose search stack is allocated afresh
// per call (with Put's, a fifth of the server's allocations per workflow step); the kept
// cursor's Seek starts again from the root every time, so it sees whatever the
// transaction changed before.
type boltWriteBucket struct {
	boltBucket
	seek *bolt.Cursor
}

func (b *boltWriteBucket) cursor() *bolt.Cursor {
	if b.seek == nil {
		b.seek = b.b.Cursor()
	}
	return b.seek
}

// Get is bbolt's Get (nil for a missing key and for a nested bucket) on the kept cursor.
func (b *boltWriteBucket) Get(key []byte) []byte {
	k, v := b.cursor().Seek(key)
	if k == nil || !bytes.Equal(k, key) {
		return nil
	}
	return v
}

// Delete is bbolt's Delete (nothing for a missing key, an error for a nested bucket) on
// the kept cursor.
func (b *boltWriteBucket) Delete(key []byte) error {
	c := b.cursor()
	if k, _ := c.Seek(key); k == nil || !bytes.Equal(k, key) {
		return nil
	}
	return c.Delete()
}

// KeyCount walks the keys: bbolt's Stats().KeyN reads the committed pages only, so in a
// write transaction it missed the transaction's own puts and deletes (a limit check after
// a create in the same group commit let a project exceed its limit). A nil value is a
// nested bucket or an empty value; only the latter counts.
func (b boltBucket) KeyCount() int {
	n := 0
	c := b.b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil || b.b.Bucket(k) == nil {
			n++
		}
	}
	return n
}

func (b boltBucket) CreateBucket(name []byte) (kv.Bucket, error) {
	sub, err := b.b.CreateBucket(name)
	if err != nil {
		return nil, err
	}
	return wrapBolt(sub), nil
}

func (b boltBucket) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	sub, err := b.b.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, err
	}
	return wrapBolt(sub), nil
}

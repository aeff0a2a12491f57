package storage

import (
	bolt "go.etcd.io/bbolt"
)

// bbolt behind the engine seam (kv.go). The wrappers are thin: a bucket is wrapped once
// per transaction (Tx caches what it opens) and cursors are bbolt's own.

type boltEngine struct{ db *bolt.DB }

func (e boltEngine) View(fn func(KVTx) error) error {
	return e.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (e boltEngine) Update(fn func(KVTx) error) error {
	return e.db.Update(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (e boltEngine) Close() error { return e.db.Close() }

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) Bucket(name []byte) KVBucket { return wrapBolt(t.tx.Bucket(name)) }

func (t boltTx) CreateBucketIfNotExists(name []byte) (KVBucket, error) {
	b, err := t.tx.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, err
	}
	return wrapBolt(b), nil
}

// wrapBolt wraps b, keeping nil a nil interface.
func wrapBolt(b *bolt.Bucket) KVBucket {
	if b == nil {
		return nil
	}
	return boltBucket{b}
}

type boltBucket struct{ b *bolt.Bucket }

func (b boltBucket) Get(key []byte) []byte       { return b.b.Get(key) }
func (b boltBucket) Put(key, value []byte) error { return b.b.Put(key, value) }
func (b boltBucket) Delete(key []byte) error     { return b.b.Delete(key) }
func (b boltBucket) Cursor() KVCursor            { return b.b.Cursor() }
func (b boltBucket) Bucket(name []byte) KVBucket { return wrapBolt(b.b.Bucket(name)) }
func (b boltBucket) ForEach(fn func(k, v []byte) error) error {
	return b.b.ForEach(fn)
}
func (b boltBucket) ForEachBucket(fn func(name []byte) error) error {
	return b.b.ForEachBucket(fn)
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

func (b boltBucket) CreateBucket(name []byte) (KVBucket, error) {
	sub, err := b.b.CreateBucket(name)
	if err != nil {
		return nil, err
	}
	return wrapBolt(sub), nil
}

func (b boltBucket) CreateBucketIfNotExists(name []byte) (KVBucket, error) {
	sub, err := b.b.CreateBucketIfNotExists(name)
	if err != nil {
		return nil, err
	}
	return wrapBolt(sub), nil
}

package walkv

import (
	"bytes"

	"github.com/duraton/duraton/storage/kv"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// A transaction of the write-ahead-logged engine reads through three layers, the first
// that has a key deciding: the overlay it started with (a write transaction's own
// clone, which its writes change), the overlay being checkpointed (frozen, may be nil),
// and bbolt (a read transaction: bbolt is written by checkpoints only). Writes go to the
// overlay and are listed in ops, which the commit writes to the log.

type walTx struct {
	e      *Engine
	base   *bolt.Tx
	top    *overlay
	frozen *overlay
	write  bool
	ops    []walOp
	probe  []byte // scratch for composite keys
}

// walOp is one write, in the order made: a put (entryValue), a delete (entryTombstone) or
// a bucket created (entryBucket). key and val point into the overlay's entry.
type walOp struct {
	kind entryKind
	id   uint32
	key  []byte
	val  []byte
}

func (t *walTx) root() *walBucket { return &walBucket{tx: t, id: 0, root: true} }

func (t *walTx) Bucket(name []byte) kv.Bucket {
	if b := t.root().bucket(name); b != nil {
		return b
	}
	return nil
}

func (t *walTx) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	return t.root().CreateBucketIfNotExists(name)
}

// walBucket is a bucket: its number in the overlay and, when bbolt has it, bbolt's.
type walBucket struct {
	tx   *walTx
	id   uint32
	root bool         // the root: its keys are the root buckets (base is the tx itself)
	base *bolt.Bucket // nil when bbolt has no such bucket (yet)
	seek *bolt.Cursor // kept for point reads of base
}

// keyState is what a key is in a bucket.
type keyState uint8

const (
	stateAbsent keyState = iota
	stateValue
	stateBucket
)

// state returns what key is, and its value when a value.
func (b *walBucket) state(key []byte) (keyState, []byte) {
	b.tx.probe = composite(b.tx.probe[:0], b.id, key)
	if en, ok := b.tx.top.Get(probe(b.tx.probe)); ok {
		return en.state()
	}
	return b.lower(key)
}

// lower is state in the layers below the top overlay: frozen, then bbolt.
func (b *walBucket) lower(key []byte) (keyState, []byte) {
	if b.tx.frozen != nil {
		b.tx.probe = composite(b.tx.probe[:0], b.id, key)
		if en, ok := b.tx.frozen.Get(probe(b.tx.probe)); ok {
			return en.state()
		}
	}
	return b.baseState(key)
}

func (e walEntry) state() (keyState, []byte) {
	switch e.kind {
	case entryValue:
		return stateValue, e.val()
	case entryBucket:
		return stateBucket, nil
	default:
		return stateAbsent, nil
	}
}

// baseState is state in bbolt alone.
func (b *walBucket) baseState(key []byte) (keyState, []byte) {
	if b.root {
		if b.tx.base.Bucket(key) != nil {
			return stateBucket, nil
		}
		return stateAbsent, nil
	}
	if b.base == nil {
		return stateAbsent, nil
	}
	if b.seek == nil {
		b.seek = b.base.Cursor()
	}
	k, v := b.seek.Seek(key)
	switch {
	case k == nil || !bytes.Equal(k, key):
		return stateAbsent, nil
	case v == nil && b.base.Bucket(key) != nil: // a cursor shows a bucket as a nil value
		return stateBucket, nil
	default:
		return stateValue, v
	}
}

// baseBucket is bbolt's nested bucket name, nil when bbolt has none.
func (b *walBucket) baseBucket(name []byte) *bolt.Bucket {
	switch {
	case b.root:
		return b.tx.base.Bucket(name)
	case b.base != nil:
		return b.base.Bucket(name)
	default:
		return nil
	}
}

func (b *walBucket) Get(key []byte) []byte {
	if st, v := b.state(key); st == stateValue {
		return v
	}
	return nil
}

func (b *walBucket) Put(key, value []byte) error {
	switch {
	case !b.tx.write:
		return berrors.ErrTxNotWritable
	case len(key) == 0:
		return berrors.ErrKeyRequired
	case len(key) > bolt.MaxKeySize:
		return berrors.ErrKeyTooLarge
	case len(value) > bolt.MaxValueSize:
		return berrors.ErrValueTooLarge
	case b.root:
		return berrors.ErrIncompatibleValue // the root holds buckets only
	}
	// One allocation holds the entry's key and value: the caller's slices may be reused
	// once the transaction ends, the entry lives until its checkpoint.
	buf := make([]byte, 0, 4+len(key)+len(value))
	buf = composite(buf, b.id, key)
	buf = append(buf, value...)
	en := walEntry{kv: buf, klen: uint32(4 + len(key)), kind: entryValue}
	// Inserted first, taken back if it replaced or would hide a bucket: one descent of
	// the top overlay, not two.
	if old, replaced := b.tx.top.ReplaceOrInsert(en); replaced && old.kind == entryBucket {
		b.tx.top.ReplaceOrInsert(old)
		return berrors.ErrIncompatibleValue
	} else if !replaced {
		if st, _ := b.lower(key); st == stateBucket {
			b.tx.top.Delete(en)
			return berrors.ErrIncompatibleValue
		}
	}
	b.tx.ops = append(b.tx.ops, walOp{kind: entryValue, id: b.id, key: en.key()[4:], val: en.val()})
	return nil
}

func (b *walBucket) Delete(key []byte) error {
	if !b.tx.write {
		return berrors.ErrTxNotWritable
	}
	b.tx.probe = composite(b.tx.probe[:0], b.id, key)
	top, inTop := b.tx.top.Get(probe(b.tx.probe))
	var below keyState
	switch {
	case inTop && top.kind == entryTombstone:
		return nil
	case inTop && top.kind == entryBucket:
		return berrors.ErrIncompatibleValue
	default:
		below, _ = b.lower(key)
		if !inTop && below == stateAbsent {
			return nil
		}
		if !inTop && below == stateBucket {
			return berrors.ErrIncompatibleValue
		}
	}
	k := composite(make([]byte, 0, 4+len(key)), b.id, key)
	if below == stateValue {
		// A lower layer has it: a tombstone hides it.
		b.tx.top.ReplaceOrInsert(walEntry{kv: k, klen: uint32(len(k)), kind: entryTombstone})
	} else {
		b.tx.top.Delete(probe(k))
	}
	b.tx.ops = append(b.tx.ops, walOp{kind: entryTombstone, id: b.id, key: k[4:]})
	return nil
}

func (b *walBucket) Cursor() kv.Cursor { return &walCursor{b: b} }

func (b *walBucket) Bucket(name []byte) kv.Bucket {
	if sub := b.bucket(name); sub != nil {
		return sub
	}
	return nil
}

// bucket opens nested bucket name, nil when absent.
func (b *walBucket) bucket(name []byte) *walBucket {
	b.tx.probe = composite(b.tx.probe[:0], b.id, name)
	en, ok := b.tx.top.Get(probe(b.tx.probe))
	if !ok && b.tx.frozen != nil {
		en, ok = b.tx.frozen.Get(probe(b.tx.probe))
	}
	var base *bolt.Bucket
	switch {
	case ok && en.kind != entryBucket:
		return nil
	case ok: // created in the overlay; bbolt may have it too (an earlier checkpoint)
		base = b.baseBucket(name)
	default:
		if base = b.baseBucket(name); base == nil {
			return nil
		}
	}
	return &walBucket{tx: b.tx, id: b.tx.e.reg.id(b.id, name), base: base}
}

func (b *walBucket) CreateBucket(name []byte) (kv.Bucket, error) {
	switch {
	case !b.tx.write:
		return nil, berrors.ErrTxNotWritable
	case len(name) == 0:
		return nil, berrors.ErrBucketNameRequired
	case len(name) > bolt.MaxKeySize:
		return nil, berrors.ErrKeyTooLarge
	}
	switch st, _ := b.state(name); st {
	case stateBucket:
		return nil, berrors.ErrBucketExists
	case stateValue:
		return nil, berrors.ErrIncompatibleValue
	}
	k := composite(make([]byte, 0, 4+len(name)), b.id, name)
	b.tx.top.ReplaceOrInsert(walEntry{kv: k, klen: uint32(len(k)), kind: entryBucket})
	b.tx.ops = append(b.tx.ops, walOp{kind: entryBucket, id: b.id, key: k[4:]})
	return &walBucket{tx: b.tx, id: b.tx.e.reg.id(b.id, name)}, nil
}

func (b *walBucket) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	if sub := b.bucket(name); sub != nil {
		return sub, nil
	}
	return b.CreateBucket(name)
}

func (b *walBucket) ForEach(fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

func (b *walBucket) ForEachBucket(fn func(name []byte) error) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			if err := fn(k); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *walBucket) KeyCount() int {
	n := 0
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil {
			n++
		}
	}
	return n
}

package storage

import (
	"bytes"
	"errors"

	"github.com/duraton/duraton/storage/kv"
)

// The group commit's second pass. When a function of a group fails, the engine's
// transaction is rolled back (its partial writes are in it) and the group is run again
// without it. In that second pass every write goes through an undo journal, so a
// function that fails there too is undone in place and its caller alone gets its error:
// however many functions fail, the others commit in at most one more pass. (Before, a
// group was run again once per failing function.) The first pass, the one every
// commit makes, keeps no journal: it costs nothing when nothing fails.
//
// Bucket creation cannot be undone (the engine seam has no bucket removal): a function
// that created a bucket and then failed rolls the pass back as before, and the group
// runs again without it.

// errUndoBucket says a failed function created a bucket, which undo cannot remove.
var errUndoBucket = errors.New("storage: a failed function created a bucket")

// undoEntry is a key's state before one write: its value, or absent.
type undoEntry struct {
	b       kv.Bucket
	key     []byte
	old     []byte
	existed bool
}

// journal records, for the function running now, how to undo its writes.
type journal struct {
	entries []undoEntry
	created bool // the function created a bucket
}

// begin starts the journal of the next function.
func (j *journal) begin() { j.entries, j.created = j.entries[:0], false }

// undo puts every key the function wrote back as it was, newest write first.
func (j *journal) undo() error {
	if j.created {
		return errUndoBucket
	}
	for i := len(j.entries) - 1; i >= 0; i-- {
		e := j.entries[i]
		var err error
		if e.existed {
			err = e.b.Put(e.key, e.old)
		} else {
			err = e.b.Delete(e.key)
		}
		if err != nil {
			return err
		}
	}
	j.entries = j.entries[:0]
	return nil
}

// record remembers key's state in b before a write.
func (j *journal) record(b kv.Bucket, key []byte) {
	k, v := b.Cursor().Seek(key)
	e := undoEntry{b: b, key: bytes.Clone(key)}
	if k != nil && bytes.Equal(k, key) {
		e.existed, e.old = true, bytes.Clone(v)
	}
	j.entries = append(j.entries, e)
}

// journalTx is a transaction whose writes are journaled.
type journalTx struct {
	tx kv.Tx
	j  *journal
}

func (t journalTx) Bucket(name []byte) kv.Bucket { return t.j.wrap(t.tx.Bucket(name)) }

func (t journalTx) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	if t.tx.Bucket(name) == nil {
		t.j.created = true
	}
	b, err := t.tx.CreateBucketIfNotExists(name)
	return t.j.wrap(b), err
}

// wrap journals b's writes (nil stays a nil interface).
// Embedded under these names: kv.Bucket would clash with the Bucket method.
type (
	kvBucket = kv.Bucket
	kvCursor = kv.Cursor
)

func (j *journal) wrap(b kv.Bucket) kv.Bucket {
	if b == nil {
		return nil
	}
	return journalBucket{kvBucket: b, j: j}
}

type journalBucket struct {
	kvBucket
	j *journal
}

func (b journalBucket) Put(key, value []byte) error {
	b.j.record(b.kvBucket, key)
	if err := b.kvBucket.Put(key, value); err != nil {
		b.j.entries = b.j.entries[:len(b.j.entries)-1] // nothing was written
		return err
	}
	return nil
}

func (b journalBucket) Delete(key []byte) error {
	b.j.record(b.kvBucket, key)
	if err := b.kvBucket.Delete(key); err != nil {
		b.j.entries = b.j.entries[:len(b.j.entries)-1]
		return err
	}
	return nil
}

func (b journalBucket) Cursor() kv.Cursor {
	return &journalCursor{kvCursor: b.kvBucket.Cursor(), b: b.kvBucket, j: b.j}
}

func (b journalBucket) Bucket(name []byte) kv.Bucket { return b.j.wrap(b.kvBucket.Bucket(name)) }

func (b journalBucket) CreateBucket(name []byte) (kv.Bucket, error) {
	b.j.created = true
	sub, err := b.kvBucket.CreateBucket(name)
	return b.j.wrap(sub), err
}

func (b journalBucket) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	if b.kvBucket.Bucket(name) == nil {
		b.j.created = true
	}
	sub, err := b.kvBucket.CreateBucketIfNotExists(name)
	return b.j.wrap(sub), err
}

// journalCursor remembers where it stands, so a Delete through it is journaled.
type journalCursor struct {
	kvCursor
	b   kv.Bucket
	j   *journal
	key []byte
}

func (c *journalCursor) at(k, v []byte) ([]byte, []byte) {
	c.key = k
	return k, v
}

func (c *journalCursor) First() ([]byte, []byte)        { return c.at(c.kvCursor.First()) }
func (c *journalCursor) Last() ([]byte, []byte)         { return c.at(c.kvCursor.Last()) }
func (c *journalCursor) Seek(s []byte) ([]byte, []byte) { return c.at(c.kvCursor.Seek(s)) }
func (c *journalCursor) Next() ([]byte, []byte)         { return c.at(c.kvCursor.Next()) }
func (c *journalCursor) Prev() ([]byte, []byte)         { return c.at(c.kvCursor.Prev()) }

func (c *journalCursor) Delete() error {
	if c.key != nil {
		c.j.record(c.b, c.key)
	}
	if err := c.kvCursor.Delete(); err != nil {
		if c.key != nil {
			c.j.entries = c.j.entries[:len(c.j.entries)-1]
		}
		return err
	}
	return nil
}

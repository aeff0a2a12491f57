package walkv

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// walCursor walks a bucket of the write-ahead-logged engine: the merge of its three
// layers in key order, an upper layer's entry hiding a lower one's, tombstones hiding
// the key. It keeps only its position (the key it is at), so the transaction's writes
// under an open cursor, its own Delete included, are seen by the next move.
type walCursor struct {
	b    *walBucket
	key  []byte // the current key; nil before the first move and past either end
	base *bolt.Cursor
	pb   []byte // scratch for the overlay's search keys
}

func (c *walCursor) First() ([]byte, []byte) { return c.forward(nil, true) }
func (c *walCursor) Last() ([]byte, []byte)  { return c.backward(nil, true) }

func (c *walCursor) Seek(seek []byte) ([]byte, []byte) { return c.forward(seek, true) }

func (c *walCursor) Next() ([]byte, []byte) {
	if c.key == nil {
		return nil, nil
	}
	return c.forward(c.key, false)
}

func (c *walCursor) Prev() ([]byte, []byte) {
	if c.key == nil {
		return nil, nil
	}
	return c.backward(c.key, false)
}

// Delete deletes the key under the cursor; the cursor stays where it was, so Next and
// Prev go on from there.
func (c *walCursor) Delete() error {
	if c.key == nil {
		return nil
	}
	return c.b.Delete(c.key)
}

func (c *walCursor) baseCursor() *bolt.Cursor {
	if c.base == nil {
		switch {
		case c.b.root:
			c.base = c.b.tx.base.Cursor()
		case c.b.base != nil:
			c.base = c.b.base.Cursor()
		}
	}
	return c.base
}

// forward moves to the first visible key after from (at or after when incl; the
// bucket's first key when from is nil); backward likewise before it.
func (c *walCursor) forward(from []byte, incl bool) ([]byte, []byte) {
	return c.move(from, incl, c.nextCandidate)
}

func (c *walCursor) backward(from []byte, incl bool) ([]byte, []byte) {
	return c.move(from, incl, c.prevCandidate)
}

// move steps with candidate past tombstones to the first visible key, and stays there.
func (c *walCursor) move(from []byte, incl bool, candidate func(from []byte, incl bool) (k, v []byte, hidden bool)) ([]byte, []byte) {
	for {
		k, v, hidden := candidate(from, incl)
		if k == nil {
			c.key = nil
			return nil, nil
		}
		if !hidden {
			c.key = k
			return k, v
		}
		from, incl = k, false
	}
}

// layerCandidate is a layer's nearest key in the direction of a move.
type layerCandidate struct {
	key []byte
	en  walEntry // for an overlay layer
	ok  bool
}

// nextCandidate finds the smallest key after from across the layers and what it is
// there: its value (nil for a bucket), or hidden when the topmost layer holding it has
// a tombstone.
func (c *walCursor) nextCandidate(from []byte, incl bool) (k, v []byte, hidden bool) {
	top := c.overlayNext(c.b.tx.top, from, incl)
	var frozen layerCandidate
	if c.b.tx.frozen != nil {
		frozen = c.overlayNext(c.b.tx.frozen, from, incl)
	}
	var bk, bv []byte
	if bc := c.baseCursor(); bc != nil {
		if from == nil {
			bk, bv = bc.First()
		} else {
			bk, bv = bc.Seek(from)
			if bk != nil && !incl && bytes.Equal(bk, from) {
				bk, bv = bc.Next()
			}
		}
	}
	return pick(top, frozen, bk, bv, func(a, b []byte) bool { return bytes.Compare(a, b) < 0 })
}

func (c *walCursor) prevCandidate(from []byte, incl bool) (k, v []byte, hidden bool) {
	top := c.overlayPrev(c.b.tx.top, from, incl)
	var frozen layerCandidate
	if c.b.tx.frozen != nil {
		frozen = c.overlayPrev(c.b.tx.frozen, from, incl)
	}
	var bk, bv []byte
	if bc := c.baseCursor(); bc != nil {
		if from == nil {
			bk, bv = bc.Last()
		} else {
			// Seek lands on the first key at or after from (or past the end); the key
			// before from is the one before that.
			bk, bv = bc.Seek(from)
			switch {
			case bk == nil: // every key is before from
				bk, bv = bc.Last()
			case incl && bytes.Equal(bk, from):
			default:
				bk, bv = bc.Prev()
			}
		}
	}
	return pick(top, frozen, bk, bv, func(a, b []byte) bool { return bytes.Compare(a, b) > 0 })
}

// pick chooses the nearest of the three candidates (before reports a is nearer than
// b), the upper layer winning a tie.
func pick(top, frozen layerCandidate, bk, bv []byte, before func(a, b []byte) bool) (k, v []byte, hidden bool) {
	best := top
	if frozen.ok && (!best.ok || before(frozen.key, best.key)) {
		best = frozen
	}
	if bk != nil && (!best.ok || before(bk, best.key)) {
		return bk, bv, false
	}
	if !best.ok {
		return nil, nil, false
	}
	switch best.en.kind {
	case entryValue:
		return best.key, best.en.val(), false
	case entryBucket:
		return best.key, nil, false
	default:
		return best.key, nil, true
	}
}

// overlayNext is o's first entry of the bucket after from (at or after when incl).
func (c *walCursor) overlayNext(o *overlay, from []byte, incl bool) layerCandidate {
	id := c.b.id
	c.pb = composite(c.pb[:0], id, from)
	if !incl {
		c.pb = append(c.pb, 0) // the smallest key after from
	}
	var out layerCandidate
	o.AscendGreaterOrEqual(probe(c.pb), func(en walEntry) bool {
		if entryBucketID(en) == id {
			out = layerCandidate{key: en.key()[4:], en: en, ok: true}
		}
		return false
	})
	return out
}

// overlayPrev is o's last entry of the bucket before from (at or before when incl; the
// bucket's last when from is nil).
func (c *walCursor) overlayPrev(o *overlay, from []byte, incl bool) layerCandidate {
	id := c.b.id
	if from == nil {
		// Every key of the bucket sorts before the bare number of the next one (no key
		// is empty).
		c.pb = composite(c.pb[:0], id+1, nil)
	} else {
		c.pb = composite(c.pb[:0], id, from)
	}
	var out layerCandidate
	o.DescendLessOrEqual(probe(c.pb), func(en walEntry) bool {
		if from != nil && !incl && bytes.Equal(en.key(), c.pb) {
			return true // skip from itself
		}
		if entryBucketID(en) == id {
			out = layerCandidate{key: en.key()[4:], en: en, ok: true}
		}
		return false
	})
	return out
}

package pg

import (
	"fmt"

	"github.com/duraton/duraton/storage/kv"
)

// bucket is one bucket of a transaction.
type bucket struct {
	t  *tx
	id int64
}

func (b *bucket) Get(key []byte) []byte {
	s := b.t.states(b.id)
	if st, ok := s.m[string(key)]; ok {
		return st.v
	}
	if b.t.err != nil {
		return nil
	}
	if b.t.cache != nil {
		if v, present, ok := b.t.cache.get(b.id, key); ok {
			s.m[string(key)] = &keyState{v: v, present: present}
			return v
		}
	} else if v, present, ok := b.t.viewGet(b.id, key); ok {
		s.m[string(key)] = &keyState{v: v, present: present}
		return v
	}
	b.t.pin()
	defer b.t.unpin()
	var v []byte
	rows, err := b.t.ptx.Query(`SELECT v FROM duraton_kv WHERE bucket = $1 AND k = $2`, b.id, key)
	if err != nil {
		b.t.fail(fmt.Errorf("pg: read: %w", err))
		return nil
	}
	found := false
	for rows.Next() {
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			b.t.fail(fmt.Errorf("pg: read: %w", err))
			return nil
		}
		found = true
	}
	if err := rows.Err(); err != nil {
		b.t.fail(fmt.Errorf("pg: read: %w", err))
		return nil
	}
	s.m[string(key)] = &keyState{v: v, present: found}
	if b.t.cache != nil {
		// Not written by this transaction (it would be in s.m): a committed value.
		b.t.cache.put(b.id, string(key), v, found)
	}
	return v
}

func (b *bucket) Put(key, value []byte) error {
	if !b.t.write {
		return errReadOnly
	}
	if len(key) == 0 {
		return fmt.Errorf("pg: key required")
	}
	if len(key) > kv.MaxKeyBytes {
		return fmt.Errorf("pg: %w: %d bytes, the limit is %d", kv.ErrKeyTooLarge, len(key), kv.MaxKeyBytes)
	}
	if b.t.err != nil {
		return b.t.err
	}
	if value == nil {
		value = []byte{}
	}
	b.set(key, &keyState{v: value, present: true, dirty: true, written: true})
	return nil
}

func (b *bucket) Delete(key []byte) error {
	if !b.t.write {
		return errReadOnly
	}
	if b.t.err != nil {
		return b.t.err
	}
	b.set(key, &keyState{dirty: true, written: true})
	return nil
}

func (b *bucket) set(key []byte, st *keyState) {
	s := b.t.states(b.id)
	if old, ok := s.m[string(key)]; ok && old.dirty {
		s.dirty--
	}
	s.m[string(key)] = st
	s.dirty++
}

func (b *bucket) Cursor() kv.Cursor { return &cursor{b: b} }

func (b *bucket) Bucket(name []byte) kv.Bucket { return b.t.bucketIn(b.id, name) }

func (b *bucket) CreateBucket(name []byte) (kv.Bucket, error) {
	return b.t.createIn(b.id, name, false)
}

func (b *bucket) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	return b.t.createIn(b.id, name, true)
}

func (b *bucket) ForEach(fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return b.t.err
}

func (b *bucket) ForEachBucket(fn func(name []byte) error) error {
	if b.t.err != nil {
		return b.t.err
	}
	b.t.pin()
	defer b.t.unpin()
	rows, err := b.t.ptx.Query(`SELECT name FROM duraton_buckets WHERE parent = $1 ORDER BY name`, b.id)
	if err != nil {
		b.t.fail(fmt.Errorf("pg: list buckets: %w", err))
		return b.t.err
	}
	var names [][]byte
	for rows.Next() {
		var n []byte
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			b.t.fail(fmt.Errorf("pg: list buckets: %w", err))
			return b.t.err
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		b.t.fail(fmt.Errorf("pg: list buckets: %w", err))
		return b.t.err
	}
	for _, n := range names {
		if err := fn(n); err != nil {
			return err
		}
	}
	return nil
}

func (b *bucket) KeyCount() int {
	if b.t.err != nil {
		return 0
	}
	b.t.pin()
	defer b.t.unpin()
	rows, err := b.t.ptx.QueryAfter(b.t.pending(b.id), `SELECT count(*) FROM duraton_kv WHERE bucket = $1`, b.id)
	if err != nil {
		b.t.fail(fmt.Errorf("pg: count: %w", err))
		return 0
	}
	var n int
	if err := (rowOf{rows}).Scan(&n); err != nil {
		b.t.fail(fmt.Errorf("pg: count: %w", err))
		return 0
	}
	return n
}

package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/duraton/duraton/storage/kv"
)

// tx is one SQL transaction behind storage's seam. Writes are kept in memory (with what
// was read) and sent in one pipelined batch at commit, or before a cursor reads the
// bucket they touch, so a transaction costs a round trip per distinct key read, not per
// operation.
type tx struct {
	e     *Engine
	ctx   context.Context
	ptx   *session
	write bool

	cache   *valueCache          // the leader's cache of committed values (write only)
	vc      *valueCache          // the same for a View, when it may read it (view.go)
	snap    uint64               // a View's pinned seq of vc
	since   int64                // a View uses entries put at this clock or later
	pinned  int8                 // pinNone, pinHeld, pinDone
	err     error                // the first failed statement: fails the transaction
	created map[bucketKey]int64  // buckets created here (cached once committed)
	keys    map[int64]*keyStates // per bucket id: keys read or written here
}

// keyState is a key as this transaction sees it.
type keyState struct {
	v       []byte
	present bool
	dirty   bool // written here, not yet sent
	written bool // written here (sent or not)
}

type keyStates struct {
	m     map[string]*keyState
	dirty int
}

var errReadOnly = errors.New("pg: write in a read-only transaction")

// fail remembers the first error; reads then find nothing and writes do nothing, and the
// transaction ends with it.
func (t *tx) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

func (t *tx) states(bucket int64) *keyStates {
	if t.keys == nil {
		t.keys = map[int64]*keyStates{}
	}
	s := t.keys[bucket]
	if s == nil {
		s = &keyStates{m: map[string]*keyState{}}
		t.keys[bucket] = s
	}
	return s
}

func (t *tx) Bucket(name []byte) kv.Bucket { return t.bucketIn(t.e.root, name) }

func (t *tx) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	return t.createIn(t.e.root, name, true)
}

// lookup finds a bucket's id.
func (t *tx) lookup(parent int64, name []byte) (int64, bool) {
	k := bucketKey{parent, string(name)}
	if id, ok := t.created[k]; ok {
		return id, true
	}
	if id, ok := t.e.buckets.Load(k); ok {
		return id.(int64), true
	}
	if t.err != nil {
		return 0, false
	}
	t.pin()
	defer t.unpin()
	var id int64
	err := t.ptx.QueryRow(`SELECT id FROM duraton_buckets WHERE parent = $1 AND name = $2`, parent, name).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false
	case err != nil:
		t.fail(fmt.Errorf("pg: read bucket: %w", err))
		return 0, false
	}
	t.e.buckets.Store(k, id) // visible to a query here and not created here: committed
	return id, true
}

func (t *tx) bucketIn(parent int64, name []byte) kv.Bucket {
	id, ok := t.lookup(parent, name)
	if !ok {
		return nil
	}
	return &bucket{t: t, id: id}
}

// errBucketExists matches bbolt's message for the same mistake.
var errBucketExists = errors.New("bucket already exists")

func (t *tx) createIn(parent int64, name []byte, ifMissing bool) (kv.Bucket, error) {
	if !t.write {
		return nil, errReadOnly
	}
	if len(name) == 0 {
		return nil, errors.New("pg: bucket name required")
	}
	if len(name) > kv.MaxKeyBytes {
		return nil, fmt.Errorf("pg: bucket name: %w: %d bytes, the limit is %d", kv.ErrKeyTooLarge, len(name), kv.MaxKeyBytes)
	}
	if id, ok := t.lookup(parent, name); ok {
		if ifMissing {
			return &bucket{t: t, id: id}, nil
		}
		return nil, errBucketExists
	}
	if t.err != nil {
		return nil, t.err
	}
	var id int64
	err := t.ptx.QueryRow(`INSERT INTO duraton_buckets (parent, name) VALUES ($1, $2)
		ON CONFLICT (parent, name) DO NOTHING RETURNING id`, parent, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		// Created meanwhile by a transaction that committed after our lookup.
		if !ifMissing {
			return nil, errBucketExists
		}
		err = t.ptx.QueryRow(`SELECT id FROM duraton_buckets WHERE parent = $1 AND name = $2`, parent, name).Scan(&id)
	}
	if err != nil {
		t.fail(fmt.Errorf("pg: create bucket: %w", err))
		return nil, t.err
	}
	if t.created == nil {
		t.created = map[bucketKey]int64{}
	}
	t.created[bucketKey{parent, string(name)}] = id
	return &bucket{t: t, id: id}, nil
}

// pending returns the bucket's pending writes as a batch, nil when there are none: a
// query that must see them sends them first, in its own round trip.
func (t *tx) pending(bucket int64) *pgx.Batch {
	s := t.keys[bucket]
	if s == nil || s.dirty == 0 {
		return nil
	}
	b := &pgx.Batch{}
	queueWrites(b, bucket, s)
	return b
}

// flushAll sends every pending write in one round trip.
func (t *tx) flushAll() error {
	if t.err != nil {
		return t.err
	}
	b := &pgx.Batch{}
	for id, s := range t.keys {
		if s.dirty > 0 {
			queueWrites(b, id, s)
		}
	}
	if b.Len() > 0 {
		t.sendBatch(b)
	}
	return t.err
}

func queueWrites(b *pgx.Batch, bucket int64, s *keyStates) {
	var putK, putV, del [][]byte
	for k, st := range s.m {
		if !st.dirty {
			continue
		}
		st.dirty = false
		if st.present {
			putK, putV = append(putK, []byte(k)), append(putV, st.v)
		} else {
			del = append(del, []byte(k))
		}
	}
	s.dirty = 0
	if len(putK) > 0 {
		b.Queue(`INSERT INTO duraton_kv (bucket, k, v) SELECT $1, u.k, u.v FROM unnest($2::bytea[], $3::bytea[]) AS u(k, v)
			ON CONFLICT (bucket, k) DO UPDATE SET v = EXCLUDED.v`, bucket, putK, putV)
	}
	if len(del) > 0 {
		b.Queue(`DELETE FROM duraton_kv WHERE bucket = $1 AND k = ANY($2::bytea[])`, bucket, del)
	}
}

// recache records what a committed transaction wrote in the cache, as of a new seq.
func (t *tx) recache() {
	if t.cache == nil {
		return
	}
	t.cache.advance()
	for id, s := range t.keys {
		for k, st := range s.m {
			if st.written {
				t.cache.put(id, k, st.v, st.present)
			}
		}
	}
}

// uncache forgets what a transaction wrote (and counts it as a commit).
func (t *tx) uncache() {
	if t.cache == nil {
		return
	}
	t.cache.advance()
	for id, s := range t.keys {
		for k, st := range s.m {
			if st.written {
				t.cache.drop(id, k)
			}
		}
	}
}

func (t *tx) sendBatch(b *pgx.Batch) {
	if err := t.ptx.SendBatch(b); err != nil {
		t.fail(fmt.Errorf("pg: write: %w", err))
	}
}

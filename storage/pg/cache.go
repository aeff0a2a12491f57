package pg

import (
	"container/list"
	"sync"
)

// valueCache holds committed values (and absences) of keys for the leader's
// transactions. While this process holds the lease it is the database's only writer —
// followers forward, and any other writer is fenced out — so what it committed last is
// what the database holds, and a key read or written once need not be read again. It
// is turned on by Fence and used by Update, and by View within the limits view.go
// states.
//
// A commit whose outcome is unknown (the connection broke during COMMIT) drops the keys
// it wrote, so they are read again. Rows read by cursors are not cached: a cursor may
// have read this transaction's own, not yet committed, writes.
type valueCache struct {
	mu       sync.Mutex
	m        map[cacheKey]*list.Element
	lru      list.List // front: most recent; values are *cacheEntry
	size     int64
	maxBytes int64

	// seq counts the commits applied to the cache (advance): an entry is the key's
	// value from its seq on, so a View pinned at seq s may use the entries of seq <= s.
	seq   uint64
	clock func() int64 // monotonic nanoseconds: when an entry was put
}

type cacheKey struct {
	bucket int64
	key    string
}

type cacheEntry struct {
	k       cacheKey
	v       []byte
	present bool
	seq     uint64 // the cache's seq when it was put
	at      int64  // clock() when it was put
}

// maxCachedValue: larger values (big bodies) are read from the database each time.
const maxCachedValue = 64 << 10

func newValueCache(maxBytes int64, clock func() int64) *valueCache {
	return &valueCache{m: map[cacheKey]*list.Element{}, maxBytes: maxBytes, clock: clock}
}

func entrySize(e *cacheEntry) int64 { return int64(len(e.v)+len(e.k.key)) + 96 }

// get returns the cached value of a key, ok false when it is not cached.
func (c *valueCache) get(bucket int64, key []byte) (v []byte, present, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[cacheKey{bucket, string(key)}]
	if !ok {
		return nil, false, false
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	return e.v, e.present, true
}

// put records a key's committed value (present false: absent).
func (c *valueCache) put(bucket int64, key string, v []byte, present bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{bucket, key}
	c.removeLocked(k)
	if len(v) > maxCachedValue {
		return
	}
	e := &cacheEntry{k: k, v: v, present: present, seq: c.seq, at: c.clock()}
	c.m[k] = c.lru.PushFront(e)
	c.size += entrySize(e)
	for c.size > c.maxBytes {
		c.removeLocked(c.lru.Back().Value.(*cacheEntry).k)
	}
}

// viewGet returns a key's cached value as of seq snap, ok false unless its entry is of
// that seq or before and was put at since or later.
func (c *valueCache) viewGet(bucket int64, key []byte, snap uint64, since int64) (v []byte, present, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[cacheKey{bucket, string(key)}]
	if !ok {
		return nil, false, false
	}
	e := el.Value.(*cacheEntry)
	if e.seq > snap || e.at < since {
		return nil, false, false
	}
	c.lru.MoveToFront(el)
	return e.v, e.present, true
}

// snapshot is the number of commits applied so far.
func (c *valueCache) snapshot() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// advance counts a commit: the entries put next are of the new seq.
func (c *valueCache) advance() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
}

// drop forgets a key.
func (c *valueCache) drop(bucket int64, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(cacheKey{bucket, key})
}

func (c *valueCache) removeLocked(k cacheKey) {
	if el, ok := c.m[k]; ok {
		c.size -= entrySize(el.Value.(*cacheEntry))
		c.lru.Remove(el)
		delete(c.m, k)
	}
}

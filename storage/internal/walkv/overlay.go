package walkv

import (
	"bytes"
	"encoding/binary"
	"sync"

	"github.com/google/btree"
)

// The overlay: what the write-ahead log holds that bbolt does not yet, in memory, one
// B-tree of entries for every bucket at once. An entry's key is its bucket's number
// (4 bytes, big-endian) then its key, so a bucket's entries are one range, in key
// order. A committed tree is never written again: a write transaction clones it (O(1),
// copy-on-write) and publishes the clone when durable, so a read transaction keeps the
// tree it started with as its snapshot, without a lock.

type entryKind uint8

const (
	entryValue     entryKind = iota + 1 // a key and its value
	entryTombstone                      // a key deleted here that a layer below still has
	entryBucket                         // a nested bucket created here
)

// walEntry is an entry: 32 bytes, which the copy-on-write copies by the node.
type walEntry struct {
	kv   []byte // the bucket number (4 bytes), the key, then an entryValue's value
	klen uint32 // the bucket number and key's length in kv
	kind entryKind
}

// key is the bucket number, then the key.
func (e walEntry) key() []byte { return e.kv[:e.klen] }

// val is an entryValue's value, never nil (an empty value is empty, not absent).
func (e walEntry) val() []byte { return e.kv[e.klen:] }

// probe is an entry to search for composite key k.
func probe(k []byte) walEntry { return walEntry{kv: k, klen: uint32(len(k))} }

type overlay = btree.BTreeG[walEntry]

func entryLess(a, b walEntry) bool { return bytes.Compare(a.key(), b.key()) < 0 }

// overlayDegree suits entries of a few dozen bytes: nodes of a few KiB.
const overlayDegree = 8

func newOverlay() *overlay { return btree.NewG(overlayDegree, entryLess) }

// composite appends bucket number id and key to dst.
func composite(dst []byte, id uint32, key []byte) []byte {
	return append(binary.BigEndian.AppendUint32(dst, id), key...)
}

func entryBucketID(e walEntry) uint32 { return binary.BigEndian.Uint32(e.kv) }

// bucketRegistry numbers the buckets the overlay has seen, by path: bucket 0 is the
// root (whose entries are the root buckets). Buckets cannot be deleted, so a number
// stays valid for the life of the engine; numbers are not stored anywhere but in the log,
// where each segment names the buckets it uses (see Engine.define).
type bucketRegistry struct {
	mu    sync.RWMutex
	ids   map[string]uint32 // parent number (4 bytes) + name → number
	paths []bucketPath      // by number
}

type bucketPath struct {
	parent uint32
	name   []byte
}

func newBucketRegistry() *bucketRegistry {
	return &bucketRegistry{ids: map[string]uint32{}, paths: []bucketPath{{}}}
}

// id returns the number of bucket name in parent, numbering it if new.
func (r *bucketRegistry) id(parent uint32, name []byte) uint32 {
	var kb [64]byte
	key := composite(kb[:0], parent, name)
	r.mu.RLock()
	id, ok := r.ids[string(key)]
	r.mu.RUnlock()
	if ok {
		return id
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.ids[string(key)]; ok {
		return id
	}
	id = uint32(len(r.paths))
	r.paths = append(r.paths, bucketPath{parent: parent, name: bytes.Clone(name)})
	r.ids[string(key)] = id
	return id
}

// path returns bucket id's parent and name.
func (r *bucketRegistry) path(id uint32) bucketPath {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.paths[id]
}

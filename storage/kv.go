package storage

// The storage engine seam. Every Tx method is written against these interfaces: nested
// buckets of byte-ordered keys, bbolt's model. bbolt implements them directly (bolt.go);
// storage/pg implements them on PostgreSQL tables, so the engine and every record codec
// run unchanged on either.
//
// Reads return nil for a missing key and never an error: an engine whose reads can fail
// (a lost connection) remembers the first failure and fails the whole transaction with
// it, so a failed read is never taken for "not found" by anything that outlives the
// transaction.

// MaxKeyBytes is the longest key and bucket name every engine takes. PostgreSQL refuses
// an index row over about 2.7 KB, and only when the transaction commits, which would
// fail every function of a group commit: storage/pg refuses a longer key at once, in
// Put, with ErrKeyTooLarge. (bbolt's own limit is 32 KiB, also refused in Put.) The API
// bounds what requests put into keys well below this.
const MaxKeyBytes = 2048

// Engine runs transactions. Update's transaction is durable when it returns nil.
// Updates on one Engine may be called concurrently and behave as if one at a time
// (bbolt has a single writer; storage/pg serialises them). Views may run alongside and
// each sees one committed snapshot.
type Engine interface {
	View(fn func(KVTx) error) error
	Update(fn func(KVTx) error) error
	Close() error
}

// KVTx is one transaction: the root buckets.
type KVTx interface {
	Bucket(name []byte) KVBucket // nil when absent
	CreateBucketIfNotExists(name []byte) (KVBucket, error)
}

// KVBucket is a bucket: ordered keys and nested buckets. Bytes returned are valid until
// the transaction ends and must not be modified.
type KVBucket interface {
	Get(key []byte) []byte // nil when absent (or a nested bucket)
	Put(key, value []byte) error
	Delete(key []byte) error
	Cursor() KVCursor
	Bucket(name []byte) KVBucket // nil when absent
	CreateBucket(name []byte) (KVBucket, error)
	CreateBucketIfNotExists(name []byte) (KVBucket, error)
	// ForEach calls fn for each key in order (nested buckets' values are nil in bbolt;
	// other engines may leave them out: no Tx method relies on seeing them).
	ForEach(fn func(k, v []byte) error) error
	ForEachBucket(fn func(name []byte) error) error
	// KeyCount is the number of keys in the bucket (nested buckets excluded).
	KeyCount() int
}

// KVCursor walks a bucket in key order. Each move returns the key and value there, or
// nil, nil past either end. Delete removes the key under the cursor.
type KVCursor interface {
	First() (key, value []byte)
	Last() (key, value []byte)
	Seek(seek []byte) (key, value []byte)
	Next() (key, value []byte)
	Prev() (key, value []byte)
	Delete() error
}

package kv

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
	View(fn func(Tx) error) error
	Update(fn func(Tx) error) error
	Close() error
}

// Tx is one transaction: the root buckets.
type Tx interface {
	Bucket(name []byte) Bucket // nil when absent
	CreateBucketIfNotExists(name []byte) (Bucket, error)
}

// Bucket is a bucket: ordered keys and nested buckets. Bytes returned are valid until
// the transaction ends and must not be modified.
type Bucket interface {
	Get(key []byte) []byte // nil when absent (or a nested bucket)
	Put(key, value []byte) error
	Delete(key []byte) error
	Cursor() Cursor
	Bucket(name []byte) Bucket // nil when absent
	CreateBucket(name []byte) (Bucket, error)
	CreateBucketIfNotExists(name []byte) (Bucket, error)
	// ForEach calls fn for each key in order (nested buckets' values are nil in bbolt;
	// other engines may leave them out: no Tx method relies on seeing them).
	ForEach(fn func(k, v []byte) error) error
	ForEachBucket(fn func(name []byte) error) error
	// KeyCount is the number of keys in the bucket (nested buckets excluded).
	KeyCount() int
}

// Cursor walks a bucket in key order. Each move returns the key and value there, or
// nil, nil past either end. Delete removes the key under the cursor.
type Cursor interface {
	First() (key, value []byte)
	Last() (key, value []byte)
	Seek(seek []byte) (key, value []byte)
	Next() (key, value []byte)
	Prev() (key, value []byte)
	Delete() error
}

// Package pg is the PostgreSQL storage engine: storage's buckets of ordered keys (the
// engine seam in storage/kv) kept in two tables, so every Tx method, record codec and
// engine behaviour runs unchanged on a database several `duraton serve` replicas share.
//
// It owns the schema (embedded migrations, applied on open under an advisory lock, so
// replicas starting together apply each once), the transactions (one short SQL
// transaction per group commit; none is ever held across an HTTP delivery), the shards
// (shards.go: the database divided into a fixed number of stores, a project in one) and
// their leases (lease.go): one replica at a time runs a shard's delivery engine, and
// every transaction it writes to the shard is fenced by the shard lease's epoch, so a
// replica that lost the lease cannot write after another took over. The replicas'
// membership rows say who is alive, to share the shards out. A resignation, a join or a
// leave NOTIFYs the replicas (watch.go): a wake-up hint only, on top of their polling.
// While it leads a shard, a replica keeps what it committed in a bounded cache
// (cache.go) that its writes read and, while its lease surely holds, its Views too
// (view.go): a delivery it wrote is read without a round trip.
//
// pg implements the seam and returns the seam's errors (kv.ErrKeyTooLarge, kv.ErrFenced);
// it does not import the domain store, whose records it never reads. Its tests run the
// store (package storage) and the shared suite (storage/storagetest) on it.
package pg

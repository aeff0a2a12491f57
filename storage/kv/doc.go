// Package kv is the storage engine seam: nested buckets of byte-ordered keys (bbolt's
// model) in transactions, and the errors engines return. The domain store (package
// storage: records, codecs, the Tx methods, group commit) is written against these
// interfaces only, so every record codec runs unchanged on each engine:
//
//   - bbolt (storage/internal/boltkv);
//   - bbolt written through a write-ahead log (storage/internal/walkv), the embedded
//     default;
//   - PostgreSQL tables (storage/pg), for replicas.
//
// The shared behaviour suite (storage/storagetest) holds every engine to the same
// contract.
//
// Reads return nil for a missing key and never an error: an engine whose reads can fail
// (a lost connection) remembers the first failure and fails the whole transaction with
// it, so a failed read is never taken for "not found" by anything that outlives the
// transaction.
//
// kv imports nothing of Duraton's.
package kv

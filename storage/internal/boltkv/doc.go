// Package boltkv is bbolt behind the engine seam (storage/kv), and the checks that belong
// to a bbolt file rather than to what it stores: Open and OpenReadOnly refuse a damaged
// file before bbolt maps it (Validate reads the meta pages, a walk reads every page of
// the B+trees, both without bbolt, which trusts them and would crash on damage), and turn
// bbolt's failures into kv.ErrLocked and kv.ErrCorrupt; CheckFile is the walk for
// `duraton check`.
//
// New wraps an open file as a kv.Engine. The store (package storage) runs its bbolt file
// through the write-ahead log (storage/internal/walkv); New alone serves the shared
// behaviour suite's plain-bbolt runs.
package boltkv

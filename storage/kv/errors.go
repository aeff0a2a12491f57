package kv

import "errors"

// Errors an engine returns. Package storage exports the same values under the same names
// (storage.ErrCorrupt is kv.ErrCorrupt), so callers match either with errors.Is.
var (
	// Opening a data file.
	ErrLocked  = errors.New("data file is locked by another process")
	ErrCorrupt = errors.New("data file is corrupt")

	// Writes.
	ErrClosed = errors.New("store is closed")
	// ErrWriteFailed: the commit itself failed (disk full, I/O error, a lost database
	// connection); nothing of it is stored. Later writes may succeed.
	ErrWriteFailed = errors.New("store write failed")
	// ErrKeyTooLarge: a key or bucket name over the engine's limit, refused by the write
	// that was given it (the function fails, not the group's commit).
	ErrKeyTooLarge = errors.New("key too large")
	// ErrFenced: this process no longer holds the leader lease of a shared database;
	// another replica may be writing, so nothing more is written from here.
	ErrFenced = errors.New("leader lease lost: writes are fenced")
)

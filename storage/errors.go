package storage

import (
	"errors"

	"github.com/duraton/duraton/storage/kv"
)

// Sentinel errors, grouped by kind of operation. Callers match them with errors.Is. Those
// an engine returns are storage/kv's values under the same names.
var (
	// Lookups.
	ErrNotFound = errors.New("not found")

	// Opening the data file.
	ErrLocked  = kv.ErrLocked
	ErrCorrupt = kv.ErrCorrupt

	// Writes.
	ErrClosed = kv.ErrClosed
	// ErrWriteFailed: the commit itself failed (disk full, I/O error, a lost database
	// connection); nothing of it is stored. Later writes may succeed.
	ErrWriteFailed = kv.ErrWriteFailed
	ErrConflict    = errors.New("record changed concurrently")
	// ErrKeyTooLarge: a key or bucket name over the engine's limit, refused by the write
	// that was given it (the function fails, not the group's commit).
	ErrKeyTooLarge = kv.ErrKeyTooLarge

	// ErrNotBolt: the operation reads the bbolt file (a backup), and this store runs on
	// another engine, whose own tools do it (pg_dump for PostgreSQL).
	ErrNotBolt = errors.New("not a bbolt store: use the database's own backup tools")
	// ErrFenced: this process no longer holds the leader lease of a shared database;
	// another replica may be writing, so nothing more is written from here.
	ErrFenced = kv.ErrFenced
)

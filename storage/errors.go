package storage

import "errors"

// Sentinel errors, grouped by kind of operation. Callers match them with errors.Is.
var (
	// Lookups.
	ErrNotFound = errors.New("not found")

	// Opening the data file.
	ErrLocked  = errors.New("data file is locked by another process")
	ErrCorrupt = errors.New("data file is corrupt")

	// Writes.
	ErrClosed = errors.New("store is closed")
	// ErrWriteFailed: the commit itself failed (disk full, I/O error); nothing of it is
	// stored. Later writes may succeed.
	ErrWriteFailed = errors.New("data file write failed")
	ErrConflict    = errors.New("record changed concurrently")
)

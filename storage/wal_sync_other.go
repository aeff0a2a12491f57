//go:build !linux

package storage

import "os"

// fdatasync is a full fsync where the platform has no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }

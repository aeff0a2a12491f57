//go:build !linux

package wal

import "os"

// fdatasync is a full fsync where the platform has no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }

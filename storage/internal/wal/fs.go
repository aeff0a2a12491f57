package wal

import (
	"io/fs"
	"os"
)

// FS is every filesystem call the log makes: the seam tests replace with a filesystem
// that fails or crashes at a chosen call (waltest). Names are paths as os takes them.
type FS interface {
	// OpenFile opens a segment (os.OpenFile's flags: create, exclusive, read-write).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// ReadFile reads a whole segment.
	ReadFile(name string) ([]byte, error)
	// Remove deletes a segment; SyncDir makes that (or a creation) durable.
	Remove(name string) error
	// ReadDir lists the names (not paths) of the files in dir.
	ReadDir(dir string) ([]string, error)
	// SyncDir flushes dir's entries: a file created or removed is only durably so once
	// its directory is synced.
	SyncDir(dir string) error
}

// File is an open segment.
type File interface {
	WriteAt(p []byte, off int64) (int, error)
	// Sync flushes the file's data and what is needed to read it back (fdatasync where
	// the platform has it): what it wrote before survives a crash.
	Sync() error
	// Truncate cuts the file (the operator's explicit choice to drop a damaged tail).
	Truncate(size int64) error
	Close() error
}

// OS is the real filesystem.
type OS struct{}

func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }
func (OS) Remove(name string) error             { return os.Remove(name) }

func (OS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (OS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

type osFile struct{ f *os.File }

func (f osFile) WriteAt(p []byte, off int64) (int, error) { return f.f.WriteAt(p, off) }
func (f osFile) Sync() error                              { return fdatasync(f.f) }
func (f osFile) Truncate(size int64) error                { return f.f.Truncate(size) }
func (f osFile) Close() error                             { return f.f.Close() }

// Package waltest is a filesystem for the write-ahead log's tests (a wal.FS) that keeps
// what a crash would keep apart from what the process sees, and fails or crashes at a
// chosen call, in the manner of Pebble's errorfs and hashicorp/raft-wal's test
// filesystems.
//
// It models a disk with a page cache: a write changes what reads see at once, and
// becomes durable when its file is synced; a created or removed file is durably so when
// its directory is synced. After a crash, every file is what its last sync left, except
// that the last write not synced yet may have reached the disk in part: any prefix of it,
// torn at any byte.
package waltest

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/duraton/duraton/storage/internal/wal"
)

// ErrCrashed is every call's answer once the filesystem has crashed.
var ErrCrashed = errors.New("waltest: the machine crashed")

// FS is an in-memory wal.FS. It is safe for concurrent use; calls are numbered from 1
// in the order they are made.
type FS struct {
	mu         sync.Mutex
	calls      int
	crashAfter int // calls after this one fail with ErrCrashed (0: never)
	crashed    bool
	faults     map[int]error // call number -> the error it fails with
	dir        map[string]*file
	durableDir map[string]*file
	last       *write // the last write not synced since
}

type file struct {
	data    []byte // what reads see
	durable []byte // what the last sync left
}

type write struct {
	f   *file
	off int64
	p   []byte
}

// New returns an empty filesystem.
func New() *FS {
	return &FS{dir: map[string]*file{}, durableDir: map[string]*file{}, faults: map[int]error{}}
}

// CrashAfter makes every call after call k fail with ErrCrashed and change nothing.
func (f *FS) CrashAfter(k int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashAfter = k
}

// FailAt makes call k fail with err. A failing write writes the first half of its bytes
// (a partial write); any other failing call changes nothing.
func (f *FS) FailAt(k int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[k] = err
}

// Calls is the number of calls made so far.
func (f *FS) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Crashed reports whether a call was refused by CrashAfter.
func (f *FS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// call numbers a call and says how it fails: ErrCrashed, an injected fault, or nil.
func (f *FS) call() error {
	f.calls++
	if f.crashAfter > 0 && f.calls > f.crashAfter {
		f.crashed = true
		return ErrCrashed
	}
	return f.faults[f.calls]
}

// AfterCrash is what a machine finds on disk after crashing now: a new filesystem with
// the durable state, where the last unsynced write is kept up to tear(len) of its bytes
// (tear returns 0..len).
func (f *FS) AfterCrash(tear func(n int) int) *FS {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := New()
	for name, fl := range f.durableDir {
		c := &file{data: slices.Clone(fl.durable)}
		if w := f.last; w != nil && w.f == fl {
			n := tear(len(w.p))
			c.data = writeAt(c.data, w.p[:n], w.off)
		}
		c.durable = slices.Clone(c.data)
		out.dir[name], out.durableDir[name] = c, c
	}
	return out
}

// Snapshot is every file's content as reads see it, by name.
func (f *FS) Snapshot() map[string][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]byte{}
	for name, fl := range f.dir {
		out[name] = slices.Clone(fl.data)
	}
	return out
}

// Patch overwrites bytes of a file, durably (damage a test makes).
func (f *FS) Patch(name string, off int64, p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.dir[name]
	fl.data = writeAt(fl.data, p, off)
	fl.durable = slices.Clone(fl.data)
}

func writeAt(data, p []byte, off int64) []byte {
	if end := int(off) + len(p); end > len(data) {
		data = append(data, make([]byte, end-len(data))...)
	}
	copy(data[off:], p)
	return data
}

func (f *FS) OpenFile(name string, flag int, _ fs.FileMode) (wal.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(); err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	fl, ok := f.dir[name]
	switch {
	case ok && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		fl = &file{}
		f.dir[name] = fl
	}
	return &handle{fs: f, f: fl, name: name}, nil
}

func (f *FS) ReadFile(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(); err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	fl, ok := f.dir[name]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(fl.data), nil
}

func (f *FS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(); err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	if _, ok := f.dir[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(f.dir, name)
	return nil
}

func (f *FS) ReadDir(dir string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(); err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: err}
	}
	var names []string
	for name := range f.dir {
		if filepath.Dir(name) == filepath.Clean(dir) {
			names = append(names, filepath.Base(name))
		}
	}
	slices.Sort(names)
	return names, nil
}

func (f *FS) SyncDir(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(); err != nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: err}
	}
	for name := range f.durableDir {
		if filepath.Dir(name) == filepath.Clean(dir) {
			delete(f.durableDir, name)
		}
	}
	for name, fl := range f.dir {
		if filepath.Dir(name) == filepath.Clean(dir) {
			f.durableDir[name] = fl
		}
	}
	return nil
}

type handle struct {
	fs     *FS
	f      *file
	name   string
	closed bool
}

func (h *handle) WriteAt(p []byte, off int64) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.closed {
		return 0, os.ErrClosed
	}
	err := h.fs.call()
	if errors.Is(err, ErrCrashed) {
		return 0, &fs.PathError{Op: "write", Path: h.name, Err: err}
	}
	n := len(p)
	if err != nil {
		n /= 2
	}
	h.f.data = writeAt(h.f.data, p[:n], off)
	h.fs.last = &write{f: h.f, off: off, p: slices.Clone(p[:n])}
	if err != nil {
		return n, &fs.PathError{Op: "write", Path: h.name, Err: err}
	}
	return n, nil
}

func (h *handle) Sync() error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.closed {
		return os.ErrClosed
	}
	if err := h.fs.call(); err != nil {
		return &fs.PathError{Op: "sync", Path: h.name, Err: err}
	}
	h.f.durable = slices.Clone(h.f.data)
	if h.fs.last != nil && h.fs.last.f == h.f {
		h.fs.last = nil
	}
	return nil
}

func (h *handle) Truncate(size int64) error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.closed {
		return os.ErrClosed
	}
	if err := h.fs.call(); err != nil {
		return &fs.PathError{Op: "truncate", Path: h.name, Err: err}
	}
	if size < int64(len(h.f.data)) {
		h.f.data = h.f.data[:size]
	} else {
		h.f.data = writeAt(h.f.data, make([]byte, size-int64(len(h.f.data))), int64(len(h.f.data)))
	}
	if h.fs.last != nil && h.fs.last.f == h.f {
		h.fs.last = nil
	}
	return nil
}

func (h *handle) Close() error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.closed {
		return os.ErrClosed
	}
	h.closed = true
	if err := h.fs.call(); err != nil {
		return &fs.PathError{Op: "close", Path: h.name, Err: err}
	}
	return nil
}

// Errors a disk gives, for FailAt.
var (
	ENOSPC error = syscall.ENOSPC
	EIO    error = syscall.EIO
)

var _ wal.FS = (*FS)(nil)

// String describes the filesystem for a failing test.
func (f *FS) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("waltest.FS{calls: %d, files: %v}", f.calls, slices.Sorted(maps.Keys(f.dir)))
}

package boltkv

import (
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/duraton/duraton/storage/kv"
)

// Options configure Open.
type Options struct {
	// LockTimeout bounds the wait for the file's lock (kv.ErrLocked after it).
	LockTimeout time.Duration
	// InitialMmapBytes is how much address space the file is mapped with at first (see
	// openBolt).
	InitialMmapBytes int
}

// Open opens (creating if needed) the bbolt file at path for writing. An existing file is
// validated first (Validate, then walkTree) and refused, untouched, when damaged: the
// error wraps kv.ErrCorrupt. A file locked by another process is kv.ErrLocked.
func Open(path string, opts Options) (*bolt.DB, error) {
	if err := Validate(path); err != nil {
		return nil, err
	}
	if err := walkTree(path, opts.LockTimeout); err != nil {
		return nil, err
	}
	return openBolt(path, opts)
}

// openBolt opens the file and turns bbolt's failure modes into clear errors: a held lock
// is kv.ErrLocked, an unreadable file kv.ErrCorrupt; a panic inside bbolt while reading a
// damaged file (the freelist is rebuilt by walking the tree, here, under the recover) is
// recovered into kv.ErrCorrupt rather than crashing the process.
func openBolt(path string, opts Options) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			db, err = nil, fmt.Errorf("storage: open %s: %w: %v", path, kv.ErrCorrupt, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout: opts.LockTimeout,
		// The freelist is rebuilt on open instead of written on every commit: fewer pages
		// per fsync on the hot path, at the cost of a scan at start-up.
		NoFreelistSync:  true,
		PreLoadFreelist: true,
		FreelistType:    bolt.FreelistMapType,
		// Address space, not memory or disk: until the file passes 256 MiB no
		// checkpoint remaps it. A remap waits for every read transaction and blocks new
		// ones while it copies the checkpoint's dirty nodes out of the old map, which
		// stalled commits for tens of ms (bench flow's wake p99: 3-8 ms, 34-70 ms under
		// load, against 0.6-1.4 and 5-14 without remaps). The file then grows 16 MiB at a
		// time (bbolt's AllocSize), sparsely.
		InitialMmapSize: opts.InitialMmapBytes,
	})
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("storage: open %s: %w", path, kv.ErrLocked)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("storage: open %s: %w: %v", path, kv.ErrCorrupt, err)
	default:
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
}

// OpenReadOnly opens the file at path read-only under bbolt's shared lock, after the
// checks Open makes: a running server makes it fail with kv.ErrLocked.
func OpenReadOnly(path string) (*bolt.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	if err := Validate(path); err != nil {
		return nil, err
	}
	if err := walkTree(path, time.Second); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("storage: open %s: %w", path, kv.ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w: %v", path, kv.ErrCorrupt, err)
	}
	return db, nil
}

// CheckFile walks the tree of the file at path (which the caller holds open with bbolt,
// read-only): what bbolt's own check would die on is an error instead.
func CheckFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	m, err := validateFile(f, info.Size())
	if err != nil {
		return err
	}
	return checkTree(f, m)
}

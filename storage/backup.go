package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/duraton/duraton/storage/internal/walkv"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Backup writes a consistent snapshot of the whole data file to w. start is called
// with the snapshot's size in bytes before anything is written to w. It returns the
// bytes written.
//
// The snapshot is made first, at disk speed, into a temporary file next to the data
// file (a checkpoint, then bbolt's Tx.WriteTo in a read transaction), and only then
// streamed to w, at whatever speed w takes it. A read transaction held for the whole of
// a slow download stalled the store: bbolt cannot grow (remap) its file while one is
// open, and a pending remap holds up the checkpoint that needs it, every new read, and
// then, once the write-ahead log reaches its bound, every commit. The price is free
// disk space for one more copy of the data file while a backup runs; the temporary file
// is unlinked as soon as it is open, so a crash leaves nothing behind (on systems that
// allow it; elsewhere it is removed when the backup ends).
func (s *Store) Backup(w io.Writer, start func(size int64)) (n int64, err error) {
	if s.db == nil {
		return 0, ErrNotBolt
	}
	f, unlinked, err := s.snapshot()
	if err != nil {
		return 0, err
	}
	defer func() {
		cerr := f.Close()
		if !unlinked {
			cerr = errors.Join(cerr, os.Remove(f.Name()))
		}
		if cerr != nil {
			err = errors.Join(err, fmt.Errorf("storage: backup: remove the snapshot: %w", cerr))
		}
	}()
	size, err := f.Seek(0, io.SeekEnd)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return 0, fmt.Errorf("storage: backup: %w", err)
	}
	start(size)
	n, err = io.Copy(w, f)
	if err == nil && n != size {
		err = fmt.Errorf("storage: backup: the snapshot is %d bytes, %d were read", size, n)
	}
	return n, err
}

// snapshot writes a consistent copy of the data file into a temporary file in the data
// file's directory and returns it open. unlinked reports that its name is gone already
// (a crash then leaves nothing behind; the open file stays readable): systems that do
// not remove an open file (Windows) get it removed after the backup.
func (s *Store) snapshot() (f *os.File, unlinked bool, err error) {
	// The snapshot is bbolt's file: what the write-ahead log holds goes into it first.
	if w, ok := s.engine.(*walkv.Engine); ok {
		if err := w.Checkpoint(); err != nil {
			return nil, false, err
		}
	}
	f, err = os.CreateTemp(filepath.Dir(s.db.Path()), ".duraton-backup-*.tmp")
	if err != nil {
		return nil, false, fmt.Errorf("storage: backup: %w", err)
	}
	unlinked = os.Remove(f.Name()) == nil
	err = s.db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	})
	if err != nil {
		err = fmt.Errorf("storage: backup: write the snapshot: %w", err)
		if cerr := f.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if !unlinked {
			err = errors.Join(err, os.Remove(f.Name()))
		}
		return nil, false, err
	}
	return f, unlinked, nil
}

// Verify opens the data file at path read-only and checks every page (bbolt's
// consistency check). A file that is not a bbolt file, truncated or damaged is ErrCorrupt;
// a file locked by a running server is ErrLocked.
func Verify(path string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("storage: verify %s: %w: %v", path, ErrCorrupt, r)
		}
	}()
	if err := checkSize(path); err != nil {
		return fmt.Errorf("storage: verify %s: %w: %v", path, ErrCorrupt, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		e := ErrCorrupt
		if errors.Is(err, berrors.ErrTimeout) {
			e = ErrLocked
		}
		return fmt.Errorf("storage: verify %s: %w: %v", path, e, err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		var first error
		for cerr := range tx.Check() { // drained to the end: the checker is a goroutine
			if first == nil {
				first = cerr
			}
		}
		if first != nil {
			return fmt.Errorf("storage: verify %s: %w: %v", path, ErrCorrupt, first)
		}
		if tx.Bucket([]byte(bucketProjects)) == nil {
			return fmt.Errorf("storage: verify %s: %w: not a Duraton data file (no projects)", path, ErrCorrupt)
		}
		return nil
	})
}

// checkSize refuses a file shorter than its newest meta page says: bbolt maps the file
// and would die of SIGBUS (not a recoverable panic) reading past its end, which is what a
// truncated copy looks like.
func checkSize(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// A meta page: the page header (16 bytes), then magic, version, page size and flags
	// (4 bytes each), the root bucket (16), the freelist page (8), the high-water page id
	// (8) and the txid (8).
	meta := func(off int64) (pageSize, end, txid uint64, ok bool) {
		buf := make([]byte, 72)
		if _, err := f.ReadAt(buf, off); err != nil || binary.LittleEndian.Uint32(buf[16:]) != 0xED0CDAED {
			return 0, 0, 0, false
		}
		pageSize = uint64(binary.LittleEndian.Uint32(buf[24:]))
		return pageSize, binary.LittleEndian.Uint64(buf[56:]) * pageSize, binary.LittleEndian.Uint64(buf[64:]), true
	}
	pageSize, end, txid, ok := meta(0)
	if !ok || pageSize == 0 {
		return errors.New("no bbolt meta page")
	}
	if _, end2, txid2, ok := meta(int64(pageSize)); ok && txid2 > txid {
		end = end2
	}
	if uint64(fi.Size()) < end {
		return fmt.Errorf("file is %d bytes, its meta page says %d: truncated", fi.Size(), end)
	}
	return nil
}

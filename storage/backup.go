package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Backup writes a consistent snapshot of the whole data file to w (a checkpoint, then
// bbolt's Tx.WriteTo in a read transaction: writers go on meanwhile, except that the
// file cannot grow until the snapshot ends). start is called first with the snapshot's size in bytes, before
// anything is written. It returns the bytes written.
func (s *Store) Backup(w io.Writer, start func(size int64)) (int64, error) {
	if s.db == nil {
		return 0, ErrNotBolt
	}
	// The snapshot is bbolt's file: what the write-ahead log holds goes into it first.
	if w, ok := s.engine.(*walEngine); ok {
		if err := w.Checkpoint(); err != nil {
			return 0, err
		}
	}
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		start(tx.Size())
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
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

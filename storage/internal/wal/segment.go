package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	magic = "DWAL0001"
	// HeaderSize is the bytes of a segment's header; its first record starts there.
	HeaderSize = 36
	// RecordHead is the bytes in front of a record's payload: length and checksum.
	RecordHead = 8
	// MaxRecord is the largest payload the format can hold; a log sets its own, smaller
	// bound (Segment.MaxRecord). A larger length field is damage.
	MaxRecord = 1 << 30
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Header is what a segment's first bytes say: the epoch of the data file it belongs to
// and the data file's transaction its records apply on top of.
type Header struct {
	Epoch    [16]byte
	BaseTxID uint64
}

func (h Header) encode() []byte {
	b := make([]byte, 0, HeaderSize)
	b = append(b, magic...)
	b = append(b, h.Epoch[:]...)
	b = binary.BigEndian.AppendUint64(b, h.BaseTxID)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func decodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize || string(b[:8]) != magic {
		return h, errors.New("not a write-ahead log segment")
	}
	if crc32.Checksum(b[:32], crcTable) != binary.BigEndian.Uint32(b[32:36]) {
		return h, errors.New("segment header checksum mismatch")
	}
	copy(h.Epoch[:], b[8:24])
	h.BaseTxID = binary.BigEndian.Uint64(b[24:32])
	return h, nil
}

// Path names segment n of the data file at dbPath.
func Path(dbPath string, n uint64) string {
	return fmt.Sprintf("%s-wal.%016x", dbPath, n)
}

// List returns the segment numbers present for dbPath, in order.
func List(fsys FS, dbPath string) ([]uint64, error) {
	dir, base := filepath.Dir(dbPath), filepath.Base(dbPath)+"-wal."
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list write-ahead log: %w", err)
	}
	var out []uint64
	for _, name := range names {
		hex, ok := strings.CutPrefix(name, base)
		if !ok || len(hex) != 16 {
			continue
		}
		if n, err := strconv.ParseUint(hex, 16, 64); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Remove deletes segment n, durably (its directory is synced).
func Remove(fsys FS, dbPath string, n uint64) error {
	path := Path(dbPath, n)
	if err := fsys.Remove(path); err != nil {
		return fmt.Errorf("remove write-ahead log: %w", err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("remove write-ahead log: sync directory: %w", err)
	}
	return nil
}

// RemoveAll deletes every segment of the data file at dbPath.
func RemoveAll(fsys FS, dbPath string) error {
	segs, err := List(fsys, dbPath)
	if err != nil {
		return err
	}
	for _, n := range segs {
		if err := Remove(fsys, dbPath, n); err != nil {
			return err
		}
	}
	return nil
}

// recordCRC is a record's checksum: its segment's number, then its payload.
func recordCRC(seg uint64, payload []byte) uint32 {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seg)
	return crc32.Update(crc32.Checksum(n[:], crcTable), crcTable, payload)
}

// Segment is the segment being written. It is not safe for concurrent use.
type Segment struct {
	f        File
	N        uint64 // its number
	Path     string
	off      int64 // where the next record goes
	alloc    int64 // bytes of the file written so far (header, records, zeros)
	Written  int64 // record bytes in this segment
	extendBy int64
	max      int
	buf      []byte
	zeros    []byte
}

// Config is how a new segment is laid out.
type Config struct {
	// ExtendBy is how much zero-filled space is added at a time ahead of the records.
	ExtendBy int64
	// MaxRecord bounds one record's payload (at most the format's MaxRecord).
	MaxRecord int
}

// ErrTooLarge is a record over the log's bound: nothing was written.
var ErrTooLarge = errors.New("record exceeds the write-ahead log's limit")

// Create creates segment n with its header, durably: the file, its header and its
// directory entry are synced before a record is written into it. On failure (a full
// disk) the file is removed again.
func Create(fsys FS, dbPath string, n uint64, h Header, cfg Config) (_ *Segment, err error) {
	path := Path(dbPath, n)
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create write-ahead log: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = fsys.Remove(path)
		}
	}()
	s := &Segment{f: f, N: n, Path: path, off: HeaderSize, extendBy: max(cfg.ExtendBy, 4<<10), max: min(cfg.MaxRecord, MaxRecord)}
	if s.max <= 0 {
		s.max = MaxRecord
	}
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return nil, fmt.Errorf("write-ahead log header: %w", err)
	}
	s.alloc = HeaderSize
	if err := s.extend(s.extendBy); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("sync write-ahead log: %w", err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("create write-ahead log: sync directory: %w", err)
	}
	return s, nil
}

// extend zero-fills at least need more bytes at the end of the file.
func (s *Segment) extend(need int64) error {
	if s.zeros == nil {
		s.zeros = make([]byte, 64<<10)
	}
	target := s.alloc + max(need, s.extendBy)
	for s.alloc < target {
		n := min(int64(len(s.zeros)), target-s.alloc)
		if _, err := s.f.WriteAt(s.zeros[:n], s.alloc); err != nil {
			return fmt.Errorf("extend write-ahead log: %w", err)
		}
		s.alloc += n
	}
	return nil
}

// Append writes one record holding payload and makes it durable. A failure leaves the
// segment as it was (the record is not there, and none of it can be replayed) unless
// fatal: after a failed sync what the file holds is unknown, and nothing more may be
// written to it.
func (s *Segment) Append(payload []byte) (fatal bool, err error) {
	if len(payload) > s.max {
		return false, fmt.Errorf("%w: a transaction of %d bytes, the limit is %d", ErrTooLarge, len(payload), s.max)
	}
	size := int64(RecordHead + len(payload))
	// The record and the zero length after it (the end mark replay stops at) must lie in
	// zero-filled space. Failing to extend it (a full disk) stores nothing: the zeros
	// written so far are zeros, where the next record goes.
	if s.off+size+RecordHead > s.alloc {
		if err := s.extend(s.off + size + RecordHead - s.alloc); err != nil {
			return false, err
		}
	}
	s.buf = binary.BigEndian.AppendUint32(s.buf[:0], uint32(len(payload)))
	s.buf = binary.BigEndian.AppendUint32(s.buf, recordCRC(s.N, payload))
	s.buf = append(s.buf, payload...)
	if _, err := s.f.WriteAt(s.buf, s.off); err != nil {
		// Whatever part was written is zeroed again, so that a complete record of a
		// transaction reported failed cannot be replayed after a crash.
		clear(s.buf)
		if _, zerr := s.f.WriteAt(s.buf, s.off); zerr != nil {
			return true, fmt.Errorf("write-ahead log: %w (and zeroing it again: %v)", err, zerr)
		}
		return false, fmt.Errorf("write-ahead log: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return true, fmt.Errorf("sync write-ahead log: %w", err)
	}
	s.off += size
	s.Written += size
	if cap(s.buf) > 4<<20 {
		s.buf = nil // a huge transaction's buffer is not kept
	}
	return false, nil
}

// Close closes the file. Every record was synced when it was appended.
func (s *Segment) Close() error { return s.f.Close() }

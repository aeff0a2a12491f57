package storage

import (
	"bytes"
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

// The write-ahead log's files. A segment is a header and then records, one per committed
// transaction, written in place into space zero-filled ahead of them: overwriting
// allocated blocks, an fdatasync flushes the data alone, not the file's size (an append
// cost ~25% more per commit on the test VM).
//
//	header: "DWAL0001" | epoch [16]byte | base txid uint64 | crc32c of the 32 bytes before
//	record: length uint32 | crc32c(segment number, payload) uint32 | payload
//
// A record's checksum is seeded with its segment's number, so nothing of an older file
// can pass for a record of this one. Replay stops at the first length of zero (the
// zero-filled space) or invalid record: only the last segment can end in one, a record
// torn by a crash in the middle of its commit, which was never acknowledged.
//
// The epoch names the data file (a random value kept in it) and the base txid is the
// bbolt transaction the segment's records apply on top of: replaying a log over a data
// file it does not belong to (another file, a restored backup of an older state) is
// refused instead of corrupting it.

const (
	walMagic      = "DWAL0001"
	walHeaderSize = 36
	walRecordHead = 8
	// walExtendBy is how much zero-filled space is added when a commit reaches the end of
	// what is allocated (less when checkpoints come sooner): about one extra fdatasync of
	// metadata per MiB of log.
	walExtendBy = 1 << 20
	// walMaxRecord bounds a record (one group commit). bbolt's own limits on keys and
	// values make a larger transaction implausible; a larger length field is damage.
	walMaxRecord = 1 << 30
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// walSegmentHeader is what a segment's first bytes say.
type walSegmentHeader struct {
	epoch    [16]byte
	baseTxID uint64
}

func (h walSegmentHeader) encode() []byte {
	b := make([]byte, 0, walHeaderSize)
	b = append(b, walMagic...)
	b = append(b, h.epoch[:]...)
	b = binary.BigEndian.AppendUint64(b, h.baseTxID)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func decodeWALHeader(b []byte) (walSegmentHeader, error) {
	var h walSegmentHeader
	if len(b) < walHeaderSize || string(b[:8]) != walMagic {
		return h, errors.New("not a write-ahead log segment")
	}
	if crc32.Checksum(b[:32], crcTable) != binary.BigEndian.Uint32(b[32:36]) {
		return h, errors.New("segment header checksum mismatch")
	}
	copy(h.epoch[:], b[8:24])
	h.baseTxID = binary.BigEndian.Uint64(b[24:32])
	return h, nil
}

// walSegmentPath names segment n of the data file at dbPath.
func walSegmentPath(dbPath string, n uint64) string {
	return fmt.Sprintf("%s-wal.%016x", dbPath, n)
}

// walSegments lists the segment numbers present for dbPath, in order.
func walSegments(dbPath string) ([]uint64, error) {
	dir, base := filepath.Dir(dbPath), filepath.Base(dbPath)+"-wal."
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), base)
		if !ok || len(name) != 16 {
			continue
		}
		n, err := strconv.ParseUint(name, 16, 64)
		if err != nil {
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// walRecordCRC is a record's checksum: its segment's number, then its payload.
func walRecordCRC(seg uint64, payload []byte) uint32 {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seg)
	return crc32.Update(crc32.Checksum(n[:], crcTable), crcTable, payload)
}

// walSegmentFile is the segment being written.
type walSegmentFile struct {
	f        *os.File
	n        uint64
	off      int64 // where the next record goes
	alloc    int64 // bytes of the file written so far (header, records, zeros)
	written  int64 // record bytes in this segment
	extendBy int64 // zero-filled space added at a time
	buf      []byte
	zeros    []byte
}

// createWALSegment creates segment n with its header, durably: the file, its header and
// its directory entry are synced before a record is written into it.
// On failure (a full disk) the file is removed again.
func createWALSegment(dbPath string, n uint64, h walSegmentHeader, extendBy int64) (_ *walSegmentFile, err error) {
	path := walSegmentPath(dbPath, n)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("storage: create write-ahead log: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}()
	s := &walSegmentFile{f: f, n: n, off: walHeaderSize, extendBy: extendBy}
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return nil, fmt.Errorf("storage: write-ahead log header: %w", err)
	}
	s.alloc = walHeaderSize
	if err := s.extend(extendBy); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("storage: sync write-ahead log: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return s, nil
}

// extend zero-fills at least need more bytes at the end of the file.
func (s *walSegmentFile) extend(need int64) error {
	if s.zeros == nil {
		s.zeros = make([]byte, 64<<10)
	}
	target := s.alloc + max(need, s.extendBy)
	for s.alloc < target {
		n := min(int64(len(s.zeros)), target-s.alloc)
		if _, err := s.f.WriteAt(s.zeros[:n], s.alloc); err != nil {
			return fmt.Errorf("storage: extend write-ahead log: %w", err)
		}
		s.alloc += n
	}
	return nil
}

// append writes one record holding payload and makes it durable. A failure leaves the
// segment as it was (the record is not there) unless fatal: after a failed fdatasync
// what the file holds is unknown, and nothing more may be written to it.
func (s *walSegmentFile) append(payload []byte) (fatal bool, err error) {
	if len(payload) > walMaxRecord {
		return false, fmt.Errorf("storage: a transaction of %d bytes exceeds the write-ahead log's limit of %d", len(payload), walMaxRecord)
	}
	size := int64(walRecordHead + len(payload))
	// The record and the zero length after it (the end mark replay stops at) must lie in
	// zero-filled space. Failing to extend it (a full disk) stores nothing.
	if s.off+size+walRecordHead > s.alloc {
		if err := s.extend(s.off + size + walRecordHead - s.alloc); err != nil {
			return false, err
		}
	}
	s.buf = binary.BigEndian.AppendUint32(s.buf[:0], uint32(len(payload)))
	s.buf = binary.BigEndian.AppendUint32(s.buf, walRecordCRC(s.n, payload))
	s.buf = append(s.buf, payload...)
	if _, err := s.f.WriteAt(s.buf, s.off); err != nil {
		// Whatever part was written is zeroed again, so that a complete record of a
		// transaction reported failed cannot be replayed after a crash.
		clear(s.buf)
		if _, zerr := s.f.WriteAt(s.buf, s.off); zerr != nil {
			return true, fmt.Errorf("storage: write-ahead log: %w (and zeroing it again: %v)", err, zerr)
		}
		return false, fmt.Errorf("storage: write-ahead log: %w", err)
	}
	if err := fdatasync(s.f); err != nil {
		return true, fmt.Errorf("storage: sync write-ahead log: %w", err)
	}
	s.off += size
	s.written += size
	if cap(s.buf) > 4<<20 {
		s.buf = nil // a huge transaction's buffer is not kept
	}
	return false, nil
}

func (s *walSegmentFile) close() error { return s.f.Close() }

// readWALSegment reads segment n: its header and its records' payloads. torn reports a
// tail that is not a clean end: an invalid record where the zero-filled space should be.
func readWALSegment(dbPath string, n uint64) (h walSegmentHeader, records [][]byte, torn bool, err error) {
	data, err := os.ReadFile(walSegmentPath(dbPath, n))
	if err != nil {
		return h, nil, false, fmt.Errorf("storage: read write-ahead log: %w", err)
	}
	if h, err = decodeWALHeader(data); err != nil {
		// A crash between creating the file and syncing its header leaves an empty or
		// partial file whose records were never written, let alone acknowledged.
		if len(data) < walHeaderSize || bytes.Count(data[walHeaderSize:], []byte{0}) == len(data)-walHeaderSize {
			return h, nil, true, errWALNoHeader
		}
		return h, nil, false, err
	}
	off := walHeaderSize
	for off+walRecordHead <= len(data) {
		length := int(binary.BigEndian.Uint32(data[off:]))
		if length == 0 {
			return h, records, false, nil
		}
		end := off + walRecordHead + length
		if length > walMaxRecord || end > len(data) {
			return h, records, true, nil
		}
		payload := data[off+walRecordHead : end]
		if walRecordCRC(n, payload) != binary.BigEndian.Uint32(data[off+4:]) {
			return h, records, true, nil
		}
		records = append(records, payload)
		off = end
	}
	return h, records, false, nil
}

var errWALNoHeader = errors.New("segment has no header")

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("storage: sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("storage: sync directory: %w", err)
	}
	return nil
}

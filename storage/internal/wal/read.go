package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// Record is one record read back: where it starts in its segment, and its payload.
type Record struct {
	Offset  int64
	Payload []byte
}

// Contents is what a segment holds.
type Contents struct {
	Header  Header
	Records []Record
	// End is where the records end: the offset of the end mark, of the end of the
	// file, or of a torn last record.
	End int64
	// Torn is set when the segment ends in an incomplete record at End: the tail of a
	// commit a crash interrupted before it was synced, hence never acknowledged.
	Torn bool
}

// ErrNoHeader is a segment without a complete header and nothing after it: its creation
// was cut short, and no record was ever written into it.
var ErrNoHeader = errors.New("segment has no header")

// DamageError is a segment whose bytes no crash of this log can leave: a damaged header,
// a bad record in a segment before the last, or a bad record followed by valid ones.
// Acknowledged records may be lost in it; nothing may be guessed away.
type DamageError struct {
	Path   string
	Offset int64
	Reason string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("write-ahead log %s is damaged at offset %d: %s", e.Path, e.Offset, e.Reason)
}

// scanBudget bounds the bytes checksummed while looking for a valid record after a bad
// one. Past it the bad record is reported as damage: refusing is safe, guessing is not.
const scanBudget = 256 << 20

// Read reads segment n of dbPath. last says whether it is the last segment, the only
// one that can end in a torn record.
//
// A record is torn, not damaged, only if it is in the last segment and no valid record
// follows it anywhere after its start: each record is synced before the next is written,
// so a crash can only cut the last one, and the space after it was zero-filled and synced
// before. A bad record followed by a valid one is damage (the way etcd's WAL decoder
// tells the two apart). The one case this cannot see is damage to the very last record
// of the log, which looks exactly like an interrupted commit.
//
// On a DamageError past the header, the returned Contents holds the header (a segment
// the data file already holds whole may be skipped whatever its records look like).
func Read(fsys FS, dbPath string, n uint64, last bool) (Contents, error) {
	path := Path(dbPath, n)
	data, err := fsys.ReadFile(path)
	if err != nil {
		return Contents{}, fmt.Errorf("read write-ahead log: %w", err)
	}
	var c Contents
	if c.Header, err = decodeHeader(data); err != nil {
		if len(data) < HeaderSize || allZero(data[HeaderSize:]) {
			return c, ErrNoHeader
		}
		return c, &DamageError{Path: path, Offset: 0, Reason: err.Error()}
	}
	off := int64(HeaderSize)
	size := int64(len(data))
	for {
		reason := ""
		if off+RecordHead > size {
			if allZero(data[off:]) {
				break // the end of the file (zeros not yet allocated when a crash came)
			}
			reason = "the file ends inside a record's head"
		} else if length := int64(binary.BigEndian.Uint32(data[off:])); length == 0 {
			if allZero(data[off:]) {
				break // the end mark: zero-filled space
			}
			reason = "a record of length zero before the end of the records"
		} else if end := off + RecordHead + length; length > MaxRecord || end > size {
			reason = fmt.Sprintf("a record of length %d runs past the end of the file (%d bytes)", length, size)
		} else if payload := data[off+RecordHead : end]; recordCRC(n, payload) != binary.BigEndian.Uint32(data[off+4:]) {
			reason = "record checksum mismatch"
		} else {
			c.Records = append(c.Records, Record{Offset: off, Payload: payload})
			off = end
			continue
		}
		if !last {
			return c, &DamageError{Path: path, Offset: off, Reason: reason + " in a segment before the last one (its records were all acknowledged)"}
		}
		switch next, ok := nextValid(data, off+1, n); {
		case !ok:
			return c, &DamageError{Path: path, Offset: off, Reason: reason + "; too much data follows to tell an interrupted commit from damage"}
		case next >= 0:
			return c, &DamageError{Path: path, Offset: off, Reason: fmt.Sprintf("%s, and a valid record follows at offset %d: not an interrupted commit", reason, next)}
		}
		c.Torn = true
		break
	}
	c.End = off
	return c, nil
}

// nextValid finds the first offset from which a valid record of segment n starts, -1 if
// there is none; ok is false when the search ran out of budget.
func nextValid(data []byte, from int64, n uint64) (off int64, ok bool) {
	budget := int64(scanBudget)
	for p := from; p+RecordHead <= int64(len(data)); p++ {
		length := int64(binary.BigEndian.Uint32(data[p:]))
		if length == 0 || length > MaxRecord || p+RecordHead+length > int64(len(data)) {
			continue
		}
		if budget -= length; budget < 0 {
			return 0, false
		}
		if recordCRC(n, data[p+RecordHead:p+RecordHead+length]) == binary.BigEndian.Uint32(data[p+4:]) {
			return p, true
		}
	}
	return -1, true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Truncate cuts segment n of dbPath at off, durably: the operator's choice to go on
// without a damaged tail. Everything from off on is lost.
func Truncate(fsys FS, dbPath string, n uint64, off int64) error {
	if off < HeaderSize {
		return fmt.Errorf("truncate write-ahead log: offset %d is inside the segment's header", off)
	}
	f, err := fsys.OpenFile(Path(dbPath, n), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("truncate write-ahead log: %w", err)
	}
	err = f.Truncate(off)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("truncate write-ahead log: %w", err)
	}
	return nil
}

// ValidAfter counts the records that read back valid in segment n of dbPath from off
// on (the ones dropping its tail there loses), and the bytes from off to the end of the
// last of them (0 when there is none).
func ValidAfter(fsys FS, dbPath string, n uint64, off int64) (records int, bytes int64, err error) {
	data, err := fsys.ReadFile(Path(dbPath, n))
	if err != nil {
		return 0, 0, fmt.Errorf("read write-ahead log: %w", err)
	}
	for p := off; ; {
		q, ok := nextValid(data, p, n)
		if !ok || q < 0 {
			return records, bytes, nil
		}
		records++
		end := q + RecordHead + int64(binary.BigEndian.Uint32(data[q:]))
		bytes, p = end-off, end
	}
}

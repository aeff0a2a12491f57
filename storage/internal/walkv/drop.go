package walkv

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"

	"github.com/duraton/duraton/storage/internal/boltkv"
	"github.com/duraton/duraton/storage/internal/wal"
)

// LogDamage is damage found in the write-ahead log of a data file: the segment file
// and the offset of the first record that is neither valid nor an interrupted commit.
type LogDamage struct {
	File   string
	Offset int64
	Reason string
}

func (d *LogDamage) String() string {
	if d.Offset < 0 {
		return d.Reason
	}
	return fmt.Sprintf("write-ahead log %s is damaged at offset %d: %s", d.File, d.Offset, d.Reason)
}

// DroppedLog is what DropLogAfter dropped.
type DroppedLog struct {
	File          string   // the damaged segment, cut at Offset
	Offset        int64    // where it was cut
	CutBytes      int64    // from Offset to the end of the last valid record after it
	RecordsAfter  int      // records after the damage that read back valid, now gone
	LaterSegments []string // later segments removed whole
	LaterBytes    int64    // their size
}

// CheckLog reads the write-ahead log of the data file at dbPath (which must not be open
// by a server: the lock is taken, shared) as Open would replay it, writing nothing. It
// returns the damage Open would refuse, or nil.
func CheckLog(dbPath string) (*LogDamage, error) {
	db, err := boltkv.OpenReadOnly(dbPath)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return CheckLogDB(db)
}

// CheckLogDB is CheckLog for the data file db, open read-only (storage.Check).
func CheckLogDB(db *bolt.DB) (*LogDamage, error) {
	segs, err := wal.List(wal.OS{}, db.Path())
	if err != nil || len(segs) == 0 {
		return nil, err
	}
	_, err = planReplay(db, wal.OS{}, segs)
	var d *wal.DamageError
	switch {
	case errors.As(err, &d):
		return &LogDamage{File: d.Path, Offset: d.Offset, Reason: d.Reason}, nil
	case err != nil:
		// A log of another data file or another state of it: not damage at an offset.
		return &LogDamage{Reason: err.Error(), Offset: -1}, nil
	}
	return nil, nil
}

// DropLogAfter is the operator's explicit choice to go on without the damaged tail of
// the write-ahead log of the data file at dbPath (no server may have it open): the
// damaged segment is cut at offset, which must be where CheckLog (or the refused start)
// found the damage, and every later segment is removed. What acknowledged commits those
// bytes held is lost; the report says how much.
func DropLogAfter(dbPath string, offset int64) (DroppedLog, error) {
	var out DroppedLog
	db, err := boltkv.OpenReadOnly(dbPath)
	if err != nil {
		return out, err
	}
	defer db.Close()
	d, err := CheckLogDB(db)
	switch {
	case err != nil:
		return out, err
	case d == nil:
		return out, errors.New("storage: the write-ahead log is not damaged: nothing to drop")
	case d.Offset < 0:
		return out, fmt.Errorf("storage: %s", d.Reason)
	case d.Offset != offset:
		return out, fmt.Errorf("storage: the write-ahead log's damage is at offset %d of %s, not %d", d.Offset, d.File, offset)
	}
	fsys := wal.OS{}
	segs, err := wal.List(fsys, dbPath)
	if err != nil {
		return out, fmt.Errorf("storage: %w", err)
	}
	out.File, out.Offset = d.File, d.Offset
	var damaged uint64
	for _, n := range segs {
		if wal.Path(dbPath, n) == d.File {
			damaged = n
		}
	}
	if out.RecordsAfter, out.CutBytes, err = wal.ValidAfter(fsys, dbPath, damaged, d.Offset); err != nil {
		return out, fmt.Errorf("storage: %w", err)
	}
	var later []uint64
	for _, n := range segs {
		if n <= damaged {
			continue
		}
		p := wal.Path(dbPath, n)
		if info, err := os.Stat(p); err == nil {
			out.LaterBytes += info.Size()
		}
		out.LaterSegments = append(out.LaterSegments, p)
		later = append(later, n)
	}
	// The last segment first: a crash in between leaves a log that is still refused,
	// never one that replays a later segment without the earlier.
	for i := len(later) - 1; i >= 0; i-- {
		if err := wal.Remove(fsys, dbPath, later[i]); err != nil {
			return out, fmt.Errorf("storage: %w", err)
		}
	}
	if d.Offset < wal.HeaderSize {
		err = wal.Remove(fsys, dbPath, damaged) // a damaged header: nothing of it is usable
	} else {
		err = wal.Truncate(fsys, dbPath, damaged, d.Offset)
	}
	if err != nil {
		return out, fmt.Errorf("storage: %w", err)
	}
	return out, nil
}

// LogDamageIn is the write-ahead log damage err reports (from Open), nil if it is not
// one.
func LogDamageIn(err error) *LogDamage {
	var d *wal.DamageError
	if !errors.As(err, &d) {
		return nil
	}
	return &LogDamage{File: d.Path, Offset: d.Offset, Reason: d.Reason}
}

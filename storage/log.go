package storage

import "github.com/duraton/duraton/storage/internal/walkv"

// The write-ahead log's errors, bounds and operator tools, which storage/internal/walkv
// implements, under the names the store's callers use.

// ErrWALFailed wraps the failure that stopped a write-ahead-logged store: after a failed
// log write or checkpoint nothing more is committed (what was acknowledged is in the log,
// and a restart replays it).
var ErrWALFailed = walkv.ErrFailed

// ErrCommitTooLarge is a commit over MaxCommitBytes.
var ErrCommitTooLarge = walkv.ErrCommitTooLarge

// MaxCommitBytes is the largest commit (one group commit's log record) a data file with
// the given CheckpointBytes takes (see walkv.MaxCommitBytes); a larger one fails with
// ErrCommitTooLarge and stores nothing.
func MaxCommitBytes(checkpointBytes int64) int64 { return walkv.MaxCommitBytes(checkpointBytes) }

// RemoveWAL deletes the write-ahead log of the data file at dbPath, which must not be
// open: what the log holds is lost. Restoring a backup over a data file discards that
// file's log with it (a log is refused over a data file it does not belong to).
func RemoveWAL(dbPath string) error { return walkv.Remove(dbPath) }

type (
	// LogDamage is damage found in the write-ahead log of a data file: the segment file
	// and the offset of the first record that is neither valid nor an interrupted commit.
	LogDamage = walkv.LogDamage
	// DroppedLog is what DropLogAfter dropped.
	DroppedLog = walkv.DroppedLog
)

// CheckLog reads the write-ahead log of the data file at dbPath (which must not be open
// by a server: the lock is taken, shared) as Open would replay it, writing nothing. It
// returns the damage Open would refuse, or nil.
func CheckLog(dbPath string) (*LogDamage, error) { return walkv.CheckLog(dbPath) }

// DropLogAfter is the operator's explicit choice to go on without the damaged tail of
// the write-ahead log of the data file at dbPath (no server may have it open): the
// damaged segment is cut at offset, which must be where CheckLog (or the refused start)
// found the damage, and every later segment is removed. What acknowledged commits those
// bytes held is lost; the report says how much.
func DropLogAfter(dbPath string, offset int64) (DroppedLog, error) {
	return walkv.DropLogAfter(dbPath, offset)
}

// LogDamageIn is the write-ahead log damage err reports (from Open), nil if it is not
// one.
func LogDamageIn(err error) *LogDamage { return walkv.LogDamageIn(err) }

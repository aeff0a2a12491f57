package walkv

import (
	"errors"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/duraton/duraton/storage/internal/wal"
	"github.com/duraton/duraton/storage/kv"
)

// Test-only hooks for the write-ahead log's crash and recovery tests (engine_test.go,
// crash_test.go).

// CrashForTest is (*Engine).Crash for an engine of OpenForTest.
func CrashForTest(e kv.Engine) error { return e.(*Engine).Crash() }

// ReplayOnlyForTest opens the bbolt file at dbPath and replays its log into it as
// Open does, then closes it without deleting the log: the state of a process killed
// right after the replay committed, before the segment files were removed.
func ReplayOnlyForTest(dbPath string) error {
	db, err := bolt.Open(dbPath, 0o600, nil)
	if err != nil {
		return err
	}
	segs, err := wal.List(wal.OS{}, dbPath)
	if err == nil && len(segs) > 0 {
		err = replayWAL(db, wal.OS{}, segs)
	}
	return errors.Join(err, db.Close())
}

// OpenOnFSForTest is OpenForTest with the log on fsys. bbolt does not
// sync (the crash-point suite crashes the log's filesystem, not bbolt's).
func OpenOnFSForTest(dir string, checkpointBytes int64, fsys wal.FS) (kv.Engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "kv.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	e, err := Open(db, Config{CheckpointBytes: checkpointBytes, FS: fsys})
	if err != nil {
		db.Close()
		return nil, err
	}
	return e, nil
}

// WaitCheckpointForTest waits for the checkpoint in progress, if any, to end: the
// crash-point suite numbers the filesystem's calls, which must come in the same order
// on every run.
func WaitCheckpointForTest(e kv.Engine) {
	w := e.(*Engine)
	w.mu.Lock()
	done := w.ckptDone
	w.mu.Unlock()
	<-done
}

// OpenForTest opens the engine on a bbolt file in dir, its checkpoints every
// checkpointBytes of log, for the engine's tests.
func OpenForTest(dir string, checkpointBytes int64) (kv.Engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "kv.db"), 0o600, nil)
	if err != nil {
		return nil, err
	}
	e, err := Open(db, Config{CheckpointBytes: checkpointBytes})
	if err != nil {
		db.Close()
		return nil, err
	}
	return e, nil
}

package storage

import (
	"errors"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/duraton/duraton/storage/internal/wal"
	"github.com/duraton/duraton/storage/kv"
)

// Test-only hooks for the write-ahead log's crash and recovery tests (wal_test.go).

// CrashWALEngineForTest stops e, an engine of OpenWALEngineForTest, the way a killed
// process leaves it on disk: what was committed is in bbolt or in the log, the log is not
// checkpointed by a final Close and not deleted. A checkpoint in progress is first let
// finish (a process killed during one is the same as one killed before it started, or
// after it committed: tests build those states from copies of the files). The engine is
// unusable afterwards (Update returns ErrClosed, Close does nothing).
func CrashWALEngineForTest(e kv.Engine) error {
	return e.(*walEngine).crash()
}

// CrashStoreForTest is CrashWALEngineForTest for a Store of Open: its group committer
// finishes what is queued, then the engine is crashed.
func CrashStoreForTest(s *Store) error {
	if !s.stopCommitter() {
		return nil
	}
	return s.engine.(*walEngine).crash()
}

func (e *walEngine) crash() error {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	// No freeze can start under writeMu, so ckptDone is the last checkpoint's.
	e.mu.Lock()
	done := e.ckptDone
	e.mu.Unlock()
	<-done
	close(e.ckptReq)
	<-e.loopDone
	return errors.Join(e.seg.Close(), e.db.Close())
}

// ReplayWALOnlyForTest opens the bbolt file at dbPath and replays its log into it as
// Open does, then closes it without deleting the log: the state of a process killed
// right after the replay committed, before the segment files were removed.
func ReplayWALOnlyForTest(dbPath string) error {
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

// OpenWALEngineOnFSForTest is OpenWALEngineForTest with the log on fsys. bbolt does not
// sync (the crash-point suite crashes the log's filesystem, not bbolt's).
func OpenWALEngineOnFSForTest(dir string, checkpointBytes int64, fsys wal.FS) (kv.Engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "kv.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	e, err := openWALEngine(db, walConfig{limit: checkpointBytes, fs: fsys})
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
	w := e.(*walEngine)
	w.mu.Lock()
	done := w.ckptDone
	w.mu.Unlock()
	<-done
}

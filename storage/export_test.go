package storage

import (
	"path/filepath"

	"github.com/duraton/duraton/storage/internal/boltkv"
	"github.com/duraton/duraton/storage/internal/walkv"
	"github.com/duraton/duraton/storage/kv"
	bolt "go.etcd.io/bbolt"
)

// OpenBoltEngineForTest opens a bare bbolt engine (no Store, no root buckets) in dir, for
// the engine seam's tests in storage_test (storagetest.ExerciseKV).
func OpenBoltEngineForTest(dir string) (kv.Engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "kv.db"), 0o600, nil)
	if err != nil {
		return nil, err
	}
	return boltkv.New(db), nil
}

// OpenWALEngineForTest opens the write-ahead-logged engine on a bbolt file in dir, its
// checkpoints every checkpointBytes of log, for the engine seam's tests.
func OpenWALEngineForTest(dir string, checkpointBytes int64) (kv.Engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "kv.db"), 0o600, nil)
	if err != nil {
		return nil, err
	}
	e, err := walkv.Open(db, walkv.Config{CheckpointBytes: checkpointBytes})
	if err != nil {
		db.Close()
		return nil, err
	}
	return e, nil
}

// CrashStoreForTest stops a Store of Open the way a killed process leaves it
// (walkv.Engine.Crash): its group committer finishes what is queued, then the engine is
// crashed.
func CrashStoreForTest(s *Store) error {
	if !s.stopCommitter() {
		return nil
	}
	return s.engine.(*walkv.Engine).Crash()
}

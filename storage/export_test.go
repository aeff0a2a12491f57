package storage

import (
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/duraton/duraton/storage/internal/boltkv"
	"github.com/duraton/duraton/storage/internal/walkv"
	"github.com/duraton/duraton/storage/kv"
)

// OpenBoltEngineForTest opens a bare bbolt engine (no Store, no log) on dir's kv.db, for
// tests in storage_test that rewrite a data file as an earlier version left it.
func OpenBoltEngineForTest(dir string) (kv.Engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "kv.db"), 0o600, nil)
	if err != nil {
		return nil, err
	}
	return boltkv.New(db), nil
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

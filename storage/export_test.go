package storage

import (
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// OpenBoltEngineForTest opens a bare bbolt engine (no Store, no root buckets) in dir, for
// the engine seam's tests in storage_test (storagetest.ExerciseKV).
func OpenBoltEngineForTest(dir string) (Engine, error) {
	db, err := bolt.Open(filepath.Join(dir, "kv.db"), 0o600, nil)
	if err != nil {
		return nil, err
	}
	return boltEngine{db}, nil
}

package storage_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/storagetest"
)

// A data file written before the retention indexes: Open builds them, so the sweeps
// find the runs that ended and the dedup records that expired before the upgrade.
func TestOpenBuildsRetentionIndexesOfAnOlderFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "kv.db") // the name OpenBoltEngineForTest opens
	s, err := storage.Open(path, storage.Options{})
	require.NoError(t, err)
	storagetest.BackfillPopulate(t, s)
	require.NoError(t, s.Close())

	// The file as an earlier version left it: no index entries, no built mark.
	e, err := storage.OpenBoltEngineForTest(dir)
	require.NoError(t, err)
	require.NoError(t, e.Update(storagetest.StripSweepIndexes))
	require.NoError(t, e.Close())

	s, err = storage.Open(path, storage.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	storagetest.BackfillCheck(t, s)
}

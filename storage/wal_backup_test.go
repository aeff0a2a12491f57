package storage_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// The write-ahead log under a Store whose data file is replaced by a backup: the log
// (storage/internal/walkv) must be refused over a file it does not apply to, and replayed
// over the one it does.

// walSegs lists the log's segment files of the data file at db, in order.
func walSegs(t *testing.T, db string) []string {
	segs, err := filepath.Glob(db + "-wal.*")
	require.NoError(t, err)
	return segs // Glob sorts; the names end in 16 hex digits
}

func readFile(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

// A data file restored from a backup is older than the log next to it: the log's first
// segment not in the backup applies on a later transaction than the backup's. Open
// refuses it rather than replaying it over the older state (which would mix two states).
// With the log moved away, the backup opens as it was taken.
func TestWALRestoredBackupIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "duraton.db")
	s, err := storage.Open(path, storage.Options{CheckpointBytes: 1 << 20})
	require.NoError(t, err)
	due := func(i int) storage.DueEntry {
		return storage.DueEntry{DueAt: int64(i), MessageID: fmt.Sprintf("m%04d", i), Project: "p", Queue: "q"}
	}
	putDue := func(from, to int) {
		for i := from; i < to; i++ {
			require.NoError(t, s.Update(func(tx *storage.Tx) error { return tx.PutDue(due(i)) }))
		}
	}
	putDue(0, 20)
	var backup bytes.Buffer
	_, err = s.Backup(&backup, func(int64) {})
	require.NoError(t, err)
	putDue(20, 40)
	_, err = s.Backup(io.Discard, func(int64) {}) // a checkpoint after the backup
	require.NoError(t, err)
	putDue(40, 60)
	require.NoError(t, storage.CrashStoreForTest(s))
	segs := walSegs(t, path)
	require.NotEmpty(t, segs)

	writeFile(t, path, backup.Bytes())
	_, err = storage.Open(path, storage.Options{CheckpointBytes: 1 << 20})
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.Equal(t, backup.Bytes(), readFile(t, path), "the restored file is left as it was")
	require.Equal(t, segs, walSegs(t, path), "the log is left as it was")

	for _, seg := range segs {
		require.NoError(t, os.Remove(seg))
	}
	s, err = storage.Open(path, storage.Options{CheckpointBytes: 1 << 20})
	require.NoError(t, err)
	var got []string
	require.NoError(t, s.View(func(tx *storage.Tx) error {
		return tx.ScanDue(nil, func(e storage.DueEntry) bool { got = append(got, e.MessageID); return true })
	}))
	var want []string
	for i := range 20 {
		want = append(want, due(i).MessageID)
	}
	require.Equal(t, want, got)
	require.NoError(t, s.Close())
}

// A backup restored with the log it was taken with (no checkpoint since) is the state the
// log applies on: that is replayed, not refused.
func TestWALBackupWithItsOwnLogRecovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "duraton.db")
	s, err := storage.Open(path, storage.Options{CheckpointBytes: 1 << 20})
	require.NoError(t, err)
	put := func(i int) {
		require.NoError(t, s.Update(func(tx *storage.Tx) error {
			return tx.PutDue(storage.DueEntry{DueAt: int64(i), MessageID: fmt.Sprint(i), Project: "p", Queue: "q"})
		}))
	}
	for i := range 10 {
		put(i)
	}
	var backup bytes.Buffer
	_, err = s.Backup(&backup, func(int64) {})
	require.NoError(t, err)
	for i := 10; i < 20; i++ {
		put(i)
	}
	require.NoError(t, storage.CrashStoreForTest(s))
	writeFile(t, path, backup.Bytes())
	s, err = storage.Open(path, storage.Options{CheckpointBytes: 1 << 20})
	require.NoError(t, err)
	n := 0
	require.NoError(t, s.View(func(tx *storage.Tx) error {
		return tx.ScanDue(nil, func(storage.DueEntry) bool { n++; return true })
	}))
	require.Equal(t, 20, n)
	require.NoError(t, s.Close())
}

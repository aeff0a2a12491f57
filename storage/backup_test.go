package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBackupRestoresEverything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "src.db"), Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Update(func(tx *Tx) error {
		if err := tx.CreateProject(&Project{ID: "p"}); err != nil {
			return err
		}
		return tx.PutMessage(&Message{ID: "msg_1", Project: "p", URL: "http://x.test/", Body: bytes.Repeat([]byte("b"), 10_000)})
	}))

	var buf bytes.Buffer
	var announced int64
	n, err := s.Backup(&buf, func(size int64) { announced = size })
	require.NoError(t, err)
	require.Equal(t, announced, n, "the announced size is what is written")
	require.Equal(t, n, int64(buf.Len()))

	copyPath := filepath.Join(dir, "copy.db")
	require.NoError(t, os.WriteFile(copyPath, buf.Bytes(), 0o600))
	require.NoError(t, Verify(copyPath))
	c, err := Open(copyPath, Options{})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.View(func(tx *Tx) error {
		m, err := tx.Message("p", "msg_1")
		require.NoError(t, err)
		require.Len(t, m.Body, 10_000)
		return nil
	}))
}

func TestVerifyRefusesBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	require.NoError(t, os.WriteFile(junk, bytes.Repeat([]byte("x"), 8192), 0o600))
	require.ErrorIs(t, Verify(junk), ErrCorrupt)

	s, err := Open(filepath.Join(dir, "ok.db"), Options{})
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = s.Backup(&buf, func(int64) {})
	require.NoError(t, err)
	require.ErrorIs(t, Verify(filepath.Join(dir, "ok.db")), ErrLocked, "a running server's file")
	require.NoError(t, s.Close())

	truncated := filepath.Join(dir, "truncated.db")
	require.NoError(t, os.WriteFile(truncated, buf.Bytes()[:buf.Len()/2], 0o600))
	require.ErrorIs(t, Verify(truncated), ErrCorrupt)
	require.ErrorIs(t, Verify(filepath.Join(dir, "missing.db")), ErrCorrupt)
}

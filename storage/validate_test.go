package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/duraton/duraton/storage/internal/boltkv"
	"github.com/stretchr/testify/require"
)

// writeDataFile makes a real data file with enough messages to span many pages, closes
// it and returns its path.
func writeDataFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "duraton.db")
	s, err := Open(path, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Update(func(tx *Tx) error {
		if err := tx.CreateProject(&Project{ID: "p", CurrentSigningKey: "k1", NextSigningKey: "k2"}); err != nil {
			return err
		}
		var ids IDGen
		for i := range 2000 {
			m := message(&ids, time.Unix(1_700_000_000+int64(i), 0))
			if err := tx.PutMessage(m); err != nil {
				return err
			}
			if err := tx.PutDue(DueOf(m)); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, s.Close())
	return path
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

func zeroRange(t *testing.T, path string, off, n int64) {
	t.Helper()
	overwrite(t, path, off, make([]byte, n))
}

func overwrite(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestDamagedDataFile(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
		want   string
	}{
		{"BothMetaPagesZeroed", func(t *testing.T, path string) { zeroRange(t, path, 0, 2*4096) }, "no valid meta page 1 either"},
		{"Empty", func(t *testing.T, path string) { require.NoError(t, os.Truncate(path, 0)) }, "empty (0 bytes)"},
		{"MetaPage0Zeroed", func(t *testing.T, path string) { zeroRange(t, path, 0, 4096) }, "meta page 0: no bbolt magic"},
		{"MetaPage1Checksum", func(t *testing.T, path string) { overwrite(t, path, 4096+16+48+7, []byte{0xff}) }, "meta page 1: checksum mismatch"}, // 16: the page header,
		{"TruncatedToHalf", func(t *testing.T, path string) {
			// Half of the pages in use: the file itself grows ahead of them (sparsely).
			buf := make([]byte, 4096)
			f, err := os.Open(path)
			require.NoError(t, err)
			_, err = f.ReadAt(buf, 0)
			require.NoError(t, f.Close())
			require.NoError(t, err)
			// Meta page 0, after the 16-byte page header: the page size at 8, the
			// high-water mark (pages in use) at 40.
			pageSize, pgid := binary.LittleEndian.Uint32(buf[16+8:]), binary.LittleEndian.Uint64(buf[16+40:])
			require.NoError(t, os.Truncate(path, int64(pgid)*int64(pageSize)/2))
		}, "truncated"},
		{"TruncatedInsideMetaPage1", func(t *testing.T, path string) { require.NoError(t, os.Truncate(path, 5000)) }, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeDataFile(t)
			tc.damage(t, path)
			before := fileSum(t, path)

			_, err := Open(path, Options{})
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, path, "the error names the file")
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, before, fileSum(t, path), "a refused file is not modified")

			r, err := Check(path, 10)
			require.NoError(t, err)
			require.NotEmpty(t, r.Problems)
			require.Equal(t, before, fileSum(t, path), "check never writes")
		})
	}

	t.Run("HealthyFilePassesCheck", func(t *testing.T) {
		t.Parallel()
		path := writeDataFile(t)
		before := fileSum(t, path)
		r, err := Check(path, 10)
		require.NoError(t, err)
		require.Empty(t, r.Problems)
		require.Greater(t, r.Pages, int64(10))
		require.Equal(t, before, fileSum(t, path))

		s, err := Open(path, Options{})
		require.NoError(t, err)
		require.NoError(t, s.View(func(tx *Tx) error {
			n := 0
			err := tx.ScanDue(nil, func(DueEntry) bool { n++; return true })
			require.Equal(t, 2000, n)
			return err
		}))
		require.NoError(t, s.Close())
	})

	t.Run("MissingFileIsCreated", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "new", "duraton.db")
		require.NoError(t, boltkv.Validate(path))
		s, err := Open(path, Options{})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.NoError(t, boltkv.Validate(path))
	})
}

package wal_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/internal/wal"
	"github.com/duraton/duraton/storage/internal/wal/waltest"
)

const db = "/data/kv.db"

// segment writes segment n holding count records and returns the filesystem and the
// records' offsets.
func segment(t *testing.T, fsys *waltest.FS, n uint64, count int) []int64 {
	s, err := wal.Create(fsys, db, n, wal.Header{BaseTxID: 7}, wal.Config{ExtendBy: 4 << 10})
	require.NoError(t, err)
	offs := []int64{wal.HeaderSize}
	for i := range count {
		_, err := s.Append(fmt.Appendf(nil, "record %d of segment %d", i, n))
		require.NoError(t, err)
		offs = append(offs, offs[len(offs)-1]+wal.RecordHead+int64(len(fmt.Sprintf("record %d of segment %d", i, n))))
	}
	require.NoError(t, s.Close())
	return offs[:count]
}

func TestReadTellsTornFromDamaged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		last   bool
		damage func(fsys *waltest.FS, offs []int64)
		torn   bool
		at     int // index of the record reported damaged; -1: none
		kept   int
	}{
		{"clean", true, func(*waltest.FS, []int64) {}, false, -1, 5},
		{"last record's payload flipped", true, func(f *waltest.FS, o []int64) { f.Patch(wal.Path(db, 1), o[4]+10, []byte{0xff}) }, true, -1, 4},
		{"last record's length zeroed half", true, func(f *waltest.FS, o []int64) { f.Patch(wal.Path(db, 1), o[4], []byte{0x7f}) }, true, -1, 4},
		{"middle record's payload flipped", true, func(f *waltest.FS, o []int64) { f.Patch(wal.Path(db, 1), o[2]+10, []byte{0xff}) }, false, 2, 2},
		{"middle record's length zeroed", true, func(f *waltest.FS, o []int64) { f.Patch(wal.Path(db, 1), o[1], make([]byte, 4)) }, false, 1, 1},
		{"middle record's checksum flipped", true, func(f *waltest.FS, o []int64) { f.Patch(wal.Path(db, 1), o[3]+5, []byte{0xee}) }, false, 3, 3},
		{"last record's payload flipped, not the last segment", false, func(f *waltest.FS, o []int64) { f.Patch(wal.Path(db, 1), o[4]+10, []byte{0xff}) }, false, 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := waltest.New()
			offs := segment(t, fsys, 1, 5)
			tc.damage(fsys, offs)
			before := fsys.Snapshot()
			c, err := wal.Read(fsys, db, 1, tc.last)
			require.Equal(t, before, fsys.Snapshot())
			require.Len(t, c.Records, tc.kept)
			if tc.at < 0 {
				require.NoError(t, err)
				require.Equal(t, tc.torn, c.Torn)
				return
			}
			var d *wal.DamageError
			require.True(t, errors.As(err, &d), "%v", err)
			require.Equal(t, offs[tc.at], d.Offset)
			require.Equal(t, wal.Path(db, 1), d.Path)
			require.Equal(t, uint64(7), c.Header.BaseTxID, "the header comes with the damage")

			// The operator's way on: cut there; what follows is counted first.
			n, _, err := wal.ValidAfter(fsys, db, 1, d.Offset)
			require.NoError(t, err)
			require.Equal(t, 4-tc.at, n)
			require.NoError(t, wal.Truncate(fsys, db, 1, d.Offset))
			c, err = wal.Read(fsys, db, 1, tc.last)
			require.NoError(t, err)
			require.Len(t, c.Records, tc.at)
		})
	}
}

func TestReadHeader(t *testing.T) {
	t.Parallel()
	fsys := waltest.New()
	segment(t, fsys, 1, 2)
	fsys.Patch(wal.Path(db, 1), 9, []byte{0xff})
	_, err := wal.Read(fsys, db, 1, true)
	var d *wal.DamageError
	require.True(t, errors.As(err, &d), "%v", err)
	require.Equal(t, int64(0), d.Offset)

	empty := waltest.New()
	f, err := empty.OpenFile(wal.Path(db, 2), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 100), 0)
	require.NoError(t, err)
	_, err = wal.Read(empty, db, 2, true)
	require.ErrorIs(t, err, wal.ErrNoHeader)
}

func TestAppendOverTheBound(t *testing.T) {
	t.Parallel()
	fsys := waltest.New()
	s, err := wal.Create(fsys, db, 1, wal.Header{}, wal.Config{MaxRecord: 100})
	require.NoError(t, err)
	fatal, err := s.Append(make([]byte, 101))
	require.False(t, fatal)
	require.ErrorIs(t, err, wal.ErrTooLarge)
	require.Zero(t, s.Written)
}

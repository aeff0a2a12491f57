package walkv_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/internal/walkv"
	"github.com/duraton/duraton/storage/kv"
)

// Segment numbers seed their records' checksums: they go on from where the last process
// left, a clean close (which deletes the log) included, and never start at 1 again.
func TestWALSegmentNumbersNeverRepeat(t *testing.T) {
	t.Parallel()
	dir, db := walDataFile(t)
	var last uint64
	for range 3 {
		e := openWAL(t, dir, 4<<10)
		segs := walSegs(t, db)
		require.Len(t, segs, 1)
		n := segNumber(t, segs[0])
		require.Greater(t, n, last, "segment %d after %d", n, last)
		m, roots := model{}, []string{}
		workload(t, e, m, &roots, 0, 150) // several segments (checkpoints every 4 KiB)
		segs = walSegs(t, db)
		last = segNumber(t, segs[len(segs)-1])
		require.Greater(t, last, n)
		require.NoError(t, e.Close())
		require.Empty(t, walSegs(t, filepath.Join(dir, "kv.db")))
	}
}

// One commit is bounded by MaxCommitBytes (the log's memory bound), with an error that
// says so and stores nothing; the bucket it would have defined is defined by the next
// commit that uses it, which a crash then replays.
func TestWALCommitOverTheBoundFailsAlone(t *testing.T) {
	t.Parallel()
	dir, _ := walDataFile(t)
	const limit = 4 << 10
	e := openWAL(t, dir, limit)
	big := bytes.Repeat([]byte{'x'}, int(walkv.MaxCommitBytes(limit))+1)
	err := e.Update(func(tx kv.Tx) error {
		b, err := openPath(tx, []string{"r", "new"})
		if err != nil {
			return err
		}
		return b.Put([]byte("big"), big)
	})
	require.ErrorIs(t, err, walkv.ErrCommitTooLarge)
	require.ErrorContains(t, err, "--checkpoint-bytes")
	m := model{}
	commitModel(t, e, m, false, func(tx kv.Tx, pending model) error {
		b, err := openPath(tx, []string{"r", "new"})
		if err != nil {
			return err
		}
		pending.ensure([]string{"r", "new"})
		return putTracked(b, pending, []string{"r", "new"}, "small", "fits")
	})
	crashWAL(t, e)
	e = openWAL(t, dir, limit)
	requireContent(t, e, []string{"r"}, m)
	require.NoError(t, e.Close())
}

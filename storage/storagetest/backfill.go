package storagetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/kv"
)

// The retention indexes on data written before them: a test writes records with
// BackfillPopulate, takes the indexes away with StripSweepIndexes (what a data file of
// an earlier version lacks), opens the store again, and checks with BackfillCheck that
// the sweeps find every record the indexes were built for.

// BackfillPopulate writes, in project p, 1,500 runs that ended long ago (more than one
// transaction of the build), one live run and dedup records expired and not.
func BackfillPopulate(t *testing.T, s *storage.Store) {
	t.Helper()
	update(t, s, func(tx *storage.Tx) error {
		if err := tx.CreateProject(&storage.Project{ID: projectP, CreatedAt: base.UnixMilli()}); err != nil {
			return err
		}
		for i := range 1500 {
			r := &storage.Run{ID: fmt.Sprintf("wfr_%04d", i), URL: "https://example.com/wf", CreatedAt: base.UnixMilli() - 5000, EndedAt: base.UnixMilli() - 4000 + int64(i), State: storage.RunSuccess}
			if err := tx.PutRun(projectP, r); err != nil {
				return err
			}
		}
		live := &storage.Run{ID: "wfr_live", URL: "https://example.com/wf", CreatedAt: base.UnixMilli() - 9000, State: storage.RunStarted}
		if err := tx.PutRun(projectP, live); err != nil {
			return err
		}
		if err := tx.PutDedup(projectP, "old", &storage.DedupRecord{ExpiresAt: base.UnixMilli() - 1}); err != nil {
			return err
		}
		return tx.PutDedup(projectP, "valid", &storage.DedupRecord{ExpiresAt: base.UnixMilli() + 1})
	})
}

// StripSweepIndexes removes the retention indexes' entries and their built mark from
// every project, through the engine seam.
func StripSweepIndexes(tx kv.Tx) error {
	root := tx.Bucket([]byte("projects"))
	return root.ForEachBucket(func(name []byte) error {
		p := root.Bucket(name)
		if err := p.Bucket([]byte("meta")).Delete([]byte("sweepindexes")); err != nil {
			return err
		}
		for _, idx := range []string{"runended", "dedupexpiry"} {
			b := p.Bucket([]byte(idx))
			if b == nil {
				continue
			}
			c := b.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// BackfillCheck sweeps s and checks that the runs and the dedup record BackfillPopulate
// made expired are found (the ended runs' index was built), and the rest kept.
func BackfillCheck(t *testing.T, s *storage.Store) {
	t.Helper()
	total := 0
	for {
		var n int
		update(t, s, func(tx *storage.Tx) (err error) {
			n, err = tx.DeleteRunsEndedBefore(projectP, base.UnixMilli(), 1000)
			return err
		})
		total += n
		if n < 1000 {
			break
		}
	}
	require.Equal(t, 1500, total, "every ended run is found")
	var d int
	update(t, s, func(tx *storage.Tx) (err error) {
		d, err = tx.DeleteExpiredDedup(projectP, base.UnixMilli(), 1000)
		return err
	})
	require.Equal(t, 1, d, "the expired dedup record is found")
	view(t, s, func(tx *storage.Tx) error {
		_, err := tx.Run(projectP, "wfr_live")
		require.NoError(t, err)
		_, err = tx.Run(projectP, "wfr_0000")
		require.ErrorIs(t, err, storage.ErrNotFound)
		_, err = tx.Dedup(projectP, "valid")
		require.NoError(t, err)
		_, err = tx.Dedup(projectP, "old")
		require.ErrorIs(t, err, storage.ErrNotFound)
		return nil
	})
}

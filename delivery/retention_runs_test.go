package delivery

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// Runs older than the retention that are still live (sleeping, waiting for an event:
// waits of up to a year are allowed), more of them than one sweep batch, do not stop
// run retention: a run that ended past the retention is deleted all the same.
func TestRunRetentionIsNotStoppedByOldLiveRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RunRetention: time.Hour, SweepInterval: time.Hour})
	now := time.Now()
	old := now.Add(-48 * time.Hour).UnixMilli()
	require.NoError(t, b.store.Update(func(tx *storage.Tx) error {
		for i := range 1100 {
			r := &storage.Run{ID: fmt.Sprintf("wfr_sleeping%04d", i), URL: "http://x.test/wf", CreatedAt: old + int64(i), State: storage.RunStarted}
			if err := tx.PutRun(testProject, r); err != nil {
				return err
			}
			if err := tx.IndexRun(testProject, r); err != nil {
				return err
			}
		}
		ended := &storage.Run{ID: "wfr_ended", URL: "http://x.test/wf", CreatedAt: old + 5000, EndedAt: old + 6000, State: storage.RunSuccess}
		if err := tx.PutRun(testProject, ended); err != nil {
			return err
		}
		return tx.IndexRun(testProject, ended)
	}))
	require.NoError(t, b.engine.sweep(t.Context()))
	require.NoError(t, b.store.View(func(tx *storage.Tx) error {
		_, err := tx.Run(testProject, "wfr_ended")
		require.ErrorIs(t, err, storage.ErrNotFound, "the ended run is past the retention")
		_, err = tx.Run(testProject, "wfr_sleeping0000")
		require.NoError(t, err, "live runs are kept however old")
		return nil
	}))
}

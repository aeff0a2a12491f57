package storage_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// UpdateRuns reports the runs its function changed, once, from the pass that committed:
// a function the group committer runs twice (a neighbour failed) is not reported twice,
// and a failed function's runs are not reported at all.
func TestUpdateRunsReportsTheCommittedPassOnce(t *testing.T) {
	s := openWithProject(t, storage.Options{})
	release, leaderDone := holdLead(t, s, putQueue("first"))

	var runsA atomic.Int32
	type result struct {
		refs []storage.RunRef
		err  error
	}
	a, b := make(chan result, 1), make(chan result, 1)
	go func() {
		refs, err := s.UpdateRuns(func(tx *storage.Tx) error {
			runsA.Add(1)
			r := &storage.Run{ID: "wfr_a", State: storage.RunStarted}
			if err := tx.PutRun("p", r); err != nil {
				return err
			}
			return tx.PutHistory("p", r.ID, 0, &storage.HistoryEntry{})
		})
		a <- result{refs, err}
	}()
	waitQueued(t, s, 1)
	failed := make(chan error, 1)
	go func() {
		failed <- s.Update(func(tx *storage.Tx) error {
			if err := tx.PutRun("p", &storage.Run{ID: "wfr_failed", State: storage.RunStarted}); err != nil {
				return err
			}
			return errors.New("no")
		})
	}()
	waitQueued(t, s, 2)
	go func() {
		refs, err := s.UpdateRuns(func(tx *storage.Tx) error {
			return tx.PutRun("p", &storage.Run{ID: "wfr_b", State: storage.RunStarted})
		})
		b <- result{refs, err}
	}()
	waitQueued(t, s, 3)
	release()
	require.NoError(t, <-leaderDone)

	ra, rb := <-a, <-b
	require.NoError(t, ra.err)
	require.NoError(t, rb.err)
	require.Error(t, <-failed)
	require.Equal(t, int32(2), runsA.Load(), "the failed neighbour made the committer run A again")
	require.Equal(t, []storage.RunRef{{Project: "p", ID: "wfr_a"}}, ra.refs)
	require.Equal(t, []storage.RunRef{{Project: "p", ID: "wfr_b"}}, rb.refs)

	refs, err := s.UpdateRuns(func(tx *storage.Tx) error { return tx.PutQueue("p", &storage.Queue{Name: "q"}) })
	require.NoError(t, err)
	require.Empty(t, refs, "a write that changes no run reports none")
}

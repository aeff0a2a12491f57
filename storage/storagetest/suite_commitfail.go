package storagetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// The group commit when several functions of one group fail.

// group queues fns behind a held lead, so they are committed as one group, and returns
// their results.
func group(t *testing.T, s *storage.Store, fns []func(*storage.Tx) error) []error {
	t.Helper()
	gate, entered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	defer release()
	lead := make(chan error, 1)
	go func() {
		lead <- s.Update(func(*storage.Tx) error {
			select {
			case <-entered:
			default:
				close(entered)
			}
			<-gate
			return nil
		})
	}()
	<-entered
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = s.Update(fn) })
		deadline := time.Now().Add(10 * time.Second)
		for s.QueuedUpdates() != i+1 { // queued in order: the group's order is known
			require.True(t, time.Now().Before(deadline), "function %d never queued", i)
			time.Sleep(100 * time.Microsecond)
		}
	}
	release()
	require.NoError(t, <-lead)
	wg.Wait()
	return errs
}

// Functions of one group that fail, some after writing, each fail their own caller
// only, with nothing of theirs stored; the others commit once (a read-modify-write
// counter counts each once), and none runs more than twice: one more pass, not one
// per failure.
func severalFailuresCostOneMorePass(t *testing.T, s *storage.Store) {
	const n = 30
	runs := make([]atomic.Int64, n)
	failing := func(i int) bool { return i%5 == 2 }
	fns := make([]func(*storage.Tx) error, n)
	for i := range n {
		fns[i] = func(tx *storage.Tx) error {
			runs[i].Add(1)
			if err := countAndQueue(tx, i); err != nil {
				return err
			}
			if err := tx.PutDedup(projectP, "shared", &storage.DedupRecord{MessageID: fmt.Sprint(i), ExpiresAt: int64(i)}); err != nil {
				return err
			}
			if failing(i) {
				return fmt.Errorf("op %d: %w", i, errRefused)
			}
			return nil
		}
	}
	errs := group(t, s, fns)
	committed, last := 0, -1
	view(t, s, func(tx *storage.Tx) error {
		for i, err := range errs {
			_, qerr := tx.Queue(projectP, fmt.Sprintf("q%02d", i))
			if failing(i) {
				require.ErrorIs(t, err, errRefused, "op %d gets its own error", i)
				require.ErrorIs(t, qerr, storage.ErrNotFound, "op %d failed: its write must not be stored", i)
				continue
			}
			require.NoError(t, err, "op %d", i)
			require.NoError(t, qerr, "op %d committed: its write is stored", i)
			committed, last = committed+1, i
		}
		c, err := counter(tx)
		require.NoError(t, err)
		require.Equal(t, committed, c, "each committed function counted once")
		d, err := tx.Dedup(projectP, "shared")
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(last), d.MessageID, "the last committed function's write, not a failed one's")
		return nil
	})
	for i := range n {
		require.LessOrEqual(t, runs[i].Load(), int64(2), "op %d ran %d times: one pass and at most one more", i, runs[i].Load())
	}
}

// A function that fails after creating a bucket (which undo cannot remove) in the
// second pass leaves no bucket behind either: that pass is rolled back and made again
// without it.
func failureThatCreatedABucket(t *testing.T, s *storage.Store) {
	errs := group(t, s, []func(*storage.Tx) error{
		func(*storage.Tx) error { return errRefused }, // the first pass fails here
		func(tx *storage.Tx) error { return tx.PutQueue(projectP, &storage.Queue{Name: "a"}) },
		func(tx *storage.Tx) error {
			if err := tx.PutApp(projectP, &storage.App{Name: "x"}); err != nil {
				return err
			}
			return errRefused
		},
		func(tx *storage.Tx) error { return tx.PutQueue(projectP, &storage.Queue{Name: "b"}) },
	})
	require.ErrorIs(t, errs[0], errRefused)
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], errRefused)
	require.NoError(t, errs[3])
	view(t, s, func(tx *storage.Tx) error {
		require.Zero(t, tx.AppCount(projectP))
		for _, q := range []string{"a", "b"} {
			_, err := tx.Queue(projectP, q)
			require.NoError(t, err)
		}
		return nil
	})
	update(t, s, func(tx *storage.Tx) error { return tx.PutApp(projectP, &storage.App{Name: "y"}) })
}

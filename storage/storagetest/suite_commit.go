package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// The group committer: rollback of one function only, re-runs, snapshot reads,
// acknowledged-is-visible.

var errRefused = errors.New("storagetest: refused on purpose")

var groupCommitTests = map[string]func(*testing.T, *storage.Store){
	"SeveralFailuresCostOneMorePass": severalFailuresCostOneMorePass, // suite_commitfail.go
	"FailureThatCreatedABucket":      failureThatCreatedABucket,
	// A failing function rolls back only its own writes; every other function's writes
	// commit once, even though it may have run more than once (a read-modify-write
	// counter counts each committed function exactly once).
	"FailureRollsBackOnlyItself": func(t *testing.T, s *storage.Store) {
		const n = 48
		var runs atomic.Int64
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = s.Update(func(tx *storage.Tx) error {
					runs.Add(1)
					if err := countAndQueue(tx, i); err != nil {
						return err
					}
					if i%3 == 0 {
						return fmt.Errorf("op %d: %w", i, errRefused)
					}
					return nil
				})
			})
		}
		wg.Wait()
		committed := 0
		view(t, s, func(tx *storage.Tx) error {
			for i, err := range errs {
				_, qerr := tx.Queue(projectP, fmt.Sprintf("q%02d", i))
				if i%3 == 0 {
					require.ErrorIs(t, err, errRefused, "op %d gets its own error", i)
					require.ErrorIs(t, qerr, storage.ErrNotFound, "op %d failed: its write must not be stored", i)
					continue
				}
				require.NoError(t, err, "op %d", i)
				require.NoError(t, qerr, "op %d committed: its write is stored", i)
				committed++
			}
			c, err := counter(tx)
			require.NoError(t, err)
			require.Equal(t, committed, c, "each committed function counted once")
			return nil
		})
		require.GreaterOrEqual(t, runs.Load(), int64(n))
	},
	// A function that runs twice returns what it made and leaves one copy: writes of a
	// rolled-back run are gone (storagetest.Twice runs every function twice).
	"FunctionMayRunTwice": func(t *testing.T, s *storage.Store) {
		tw := NewTwice(s)
		var ids storage.IDGen
		m := message(&ids, projectP, base)
		for range 3 {
			require.NoError(t, tw.Update(func(tx *storage.Tx) error {
				c, err := counter(tx)
				if err != nil {
					return err
				}
				if err := tx.PutQueue(projectP, &storage.Queue{Name: "counter", Parallelism: c + 1}); err != nil {
					return err
				}
				return tx.PutDue(storage.DueOf(m))
			}))
		}
		view(t, s, func(tx *storage.Tx) error {
			c, err := counter(tx)
			require.NoError(t, err)
			require.Equal(t, 3, c)
			require.True(t, tx.HasDue(storage.DueOf(m)))
			return nil
		})
	},
	// A function that fails after creating a bucket (the first write of its kind in a
	// project) leaves no bucket behind, and a later function creates and uses it.
	"FailedFunctionCreatesNothing": func(t *testing.T, s *storage.Store) {
		err := s.Update(func(tx *storage.Tx) error {
			if err := tx.PutApp(projectP, &storage.App{Name: "a"}); err != nil {
				return err
			}
			if err := tx.PutGate(projectP, "g", &storage.GateState{ExpiresAt: 1}); err != nil {
				return err
			}
			return errRefused
		})
		require.ErrorIs(t, err, errRefused)
		view(t, s, func(tx *storage.Tx) error {
			require.Zero(t, tx.AppCount(projectP))
			_, err := tx.Gate(projectP, "g")
			require.ErrorIs(t, err, storage.ErrNotFound)
			return nil
		})
		update(t, s, func(tx *storage.Tx) error { return tx.PutApp(projectP, &storage.App{Name: "b"}) })
		update(t, s, func(tx *storage.Tx) error { return tx.PutGate(projectP, "g2", &storage.GateState{ExpiresAt: 2}) })
		view(t, s, func(tx *storage.Tx) error {
			as, err := tx.Apps(projectP)
			require.NoError(t, err)
			require.Len(t, as, 1)
			require.Equal(t, "b", as[0].Name)
			st, err := tx.Gate(projectP, "g2")
			require.NoError(t, err)
			require.Equal(t, int64(2), st.ExpiresAt)
			return nil
		})
	},
	// A read transaction is one snapshot: commits landing while it reads are seen whole
	// or not at all, and never between two of its reads.
	"SnapshotReads": func(t *testing.T, s *storage.Store) {
		const writes = 60
		done := make(chan struct{})
		// The writes start once a read has completed, so that reads run among them
		// however the goroutines are scheduled (a loaded machine once ran every write
		// before any reader's first View).
		firstRead := make(chan struct{})
		var readOnce sync.Once
		var wg sync.WaitGroup
		wg.Go(func() {
			defer close(done)
			select {
			case <-firstRead:
			case <-time.After(10 * time.Second): // a reader failed: its error says why
			}
			for i := 1; i <= writes; i++ {
				if err := s.Update(func(tx *storage.Tx) error {
					if err := tx.PutQueue(projectP, &storage.Queue{Name: fmt.Sprintf("q%03d", i)}); err != nil {
						return err
					}
					return tx.PutDedup(projectP, "written", &storage.DedupRecord{ExpiresAt: int64(i)})
				}); err != nil {
					t.Errorf("write %d: %v", i, err)
					return
				}
			}
		})
		var reads atomic.Int64
		for range 3 {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					err := s.View(func(tx *storage.Tx) error {
						before := written(tx)
						n := tx.QueueCount(projectP)
						qs, err := tx.Queues(projectP)
						if err != nil {
							return err
						}
						after := written(tx)
						if before != after || int64(n) != before || int64(len(qs)) != before {
							return fmt.Errorf("one read transaction saw %d writes, then %d queues counted, %d listed, then %d writes", before, n, len(qs), after)
						}
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					reads.Add(1)
					readOnce.Do(func() { close(firstRead) })
				}
			})
		}
		wg.Wait()
		view(t, s, func(tx *storage.Tx) error {
			require.Equal(t, int64(writes), written(tx))
			return nil
		})
		require.Positive(t, reads.Load())
	},
	// An Update answers only after its commit: a View that starts afterwards sees it,
	// and a closed store refuses writes.
	"AcknowledgedIsVisibleAndCloseRefuses": func(t *testing.T, s *storage.Store) {
		for i := range 20 {
			update(t, s, func(tx *storage.Tx) error {
				return tx.PutQueue(projectP, &storage.Queue{Name: "counter", Parallelism: i + 1})
			})
			view(t, s, func(tx *storage.Tx) error {
				c, err := counter(tx)
				require.NoError(t, err)
				require.Equal(t, i+1, c)
				return nil
			})
		}
		require.NoError(t, s.Close())
		require.ErrorIs(t, s.Update(func(*storage.Tx) error { return nil }), storage.ErrClosed)
	},
}

// written is SnapshotReads' count of writes (0 before the first).
func written(tx *storage.Tx) int64 {
	r, err := tx.Dedup(projectP, "written")
	if err != nil {
		return 0
	}
	return r.ExpiresAt
}

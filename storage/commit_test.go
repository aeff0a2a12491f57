package storage_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// The leader/follower group commit: who commits, how the lead moves on, what a
// panicking function does to its group, and Close.

// Callers that arrive while a group commits are queued and committed as the next group,
// led by the oldest of them; one function panicking fails its group only: the others in
// it get ErrWriteFailed and store nothing, the panic reaches the leader's caller, and
// the store goes on committing.
func TestGroupCommitLeadMovesOnAndPanicFailsOneGroup(t *testing.T) {
	s := openWithProject(t, storage.Options{})
	release, leaderDone := holdLead(t, s, putQueue("first"))
	require.Zero(t, s.QueuedUpdates(), "the leader took its own function out of the queue")

	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_ = s.Update(func(*storage.Tx) error { panic("boom") })
	}()
	waitQueued(t, s, 1)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, name := range []string{"a", "b", "c"} {
		wg.Go(func() { errs[i] = s.Update(putQueue(name)) })
		waitQueued(t, s, 2+i)
	}

	release()
	require.NoError(t, <-leaderDone)
	require.Equal(t, "boom", <-panicked, "the panic reaches the caller that led the group it was in")
	wg.Wait()
	for i, err := range errs {
		require.ErrorIs(t, err, storage.ErrWriteFailed, "function %d shared the panicking group", i)
	}

	require.NoError(t, s.Update(putQueue("after")), "the lead was given up: the next caller commits")
	require.NoError(t, s.View(func(tx *storage.Tx) error {
		for _, name := range []string{"first", "after"} {
			if _, err := tx.Queue("p", name); err != nil {
				return err
			}
		}
		for _, name := range []string{"a", "b", "c"} {
			if _, err := tx.Queue("p", name); !errors.Is(err, storage.ErrNotFound) {
				return errors.New(name + " was in the failed group but is stored")
			}
		}
		return nil
	}))
	st := s.Stats()
	require.Equal(t, int64(3), st.Commits, "the project, first, after: the failed group made no commit")
}

// Groups hold at most MaxBatch functions: five callers queued behind a held lead commit
// as 2, 2 and 1, oldest first, each group led by its oldest caller.
func TestGroupCommitKeepsMaxBatch(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	s := openWithProject(t, storage.Options{MaxBatch: 2, OnCommit: func(ops int, _ time.Duration) {
		mu.Lock()
		sizes = append(sizes, ops)
		mu.Unlock()
	}})
	release, leaderDone := holdLead(t, s, func(*storage.Tx) error { return nil })
	errs := make(chan error, 5)
	for i := range 5 {
		go func() { errs <- s.Update(putQueue(fmt.Sprintf("q%d", i))) }()
		waitQueued(t, s, i+1)
	}
	release()
	require.NoError(t, <-leaderDone)
	for range 5 {
		require.NoError(t, <-errs)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, 1, 2, 2, 1}, sizes, "the project, the held lead, then the five queued in groups of at most two")
}

// Close waits for the group in progress and for every function queued behind it.
func TestCloseWaitsForQueuedGroups(t *testing.T) {
	s := openWithProject(t, storage.Options{})
	release, leaderDone := holdLead(t, s, putQueue("lead"))
	errs := make(chan error, 4)
	for i, name := range []string{"q1", "q2", "q3", "q4"} {
		go func() { errs <- s.Update(putQueue(name)) }()
		waitQueued(t, s, i+1)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a group was being committed")
	case <-time.After(20 * time.Millisecond):
	}
	require.ErrorIs(t, s.Update(func(*storage.Tx) error { return nil }), storage.ErrClosed)
	release()
	require.NoError(t, <-closed)
	require.NoError(t, <-leaderDone)
	for range 4 {
		require.NoError(t, <-errs)
	}
}

// openWithProject opens a store in a temporary directory with project "p" in it; it is
// closed when the test ends.
func openWithProject(t *testing.T, opts storage.Options) *storage.Store {
	t.Helper()
	s, err := storage.Open(filepath.Join(t.TempDir(), "d.db"), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Update(func(tx *storage.Tx) error { return tx.CreateProject(&storage.Project{ID: "p"}) }))
	return s
}

func putQueue(name string) func(*storage.Tx) error {
	return func(tx *storage.Tx) error { return tx.PutQueue("p", &storage.Queue{Name: name}) }
}

// holdLead starts an Update that takes the lead and holds it, inside its function,
// until release is called; then it runs fn. Everything updated meanwhile queues behind
// it. done has the Update's result. release may be called more than once, and is called
// when the test ends (a failed check must not leave the lead held: Close would wait).
func holdLead(t *testing.T, s *storage.Store, fn func(*storage.Tx) error) (release func(), done <-chan error) {
	t.Helper()
	gate, entered := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	result := make(chan error, 1)
	go func() {
		result <- s.Update(func(tx *storage.Tx) error {
			close(entered)
			<-gate
			return fn(tx)
		})
	}()
	<-entered
	return release, result
}

// waitQueued waits until n Update functions are queued behind the group being committed.
func waitQueued(t *testing.T, s *storage.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.QueuedUpdates() != n {
		require.True(t, time.Now().Before(deadline), "want %d queued, have %d", n, s.QueuedUpdates())
		time.Sleep(time.Millisecond)
	}
}

// A group whose record is over the log's bound is committed one function at a time: two
// writes that fit the bound alone but not together both commit, and one over it alone
// fails alone.
func TestGroupOverTheCommitBoundIsSplit(t *testing.T) {
	s := openWithProject(t, storage.Options{})
	limit := storage.MaxCommitBytes(storage.Options{}.CheckpointBytes)
	put := func(run string, n int64) func(*storage.Tx) error {
		return func(tx *storage.Tx) error {
			return tx.PutHistory("p", run, 0, &storage.HistoryEntry{MessageID: "m", Body: make([]byte, n)})
		}
	}
	release, leaderDone := holdLead(t, s, func(*storage.Tx) error { return nil })
	errs := make([]chan error, 3)
	for i, fn := range []func(*storage.Tx) error{put("wfr_a", limit*5/8), put("wfr_b", limit*5/8), put("wfr_c", limit+1)} {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- s.Update(fn) }()
		waitQueued(t, s, i+1)
	}
	release()
	require.NoError(t, <-leaderDone)
	require.NoError(t, <-errs[0], "fits alone")
	require.NoError(t, <-errs[1], "fits alone")
	require.ErrorIs(t, <-errs[2], storage.ErrCommitTooLarge, "too large alone")
	require.NoError(t, s.View(func(tx *storage.Tx) error {
		for _, run := range []string{"wfr_a", "wfr_b"} {
			h, err := tx.History("p", run, 1)
			require.NoError(t, err)
			require.Len(t, h, 1)
			require.Len(t, h[0].Body, int(limit*5/8))
		}
		return nil
	}))
}

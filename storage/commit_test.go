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

// The leader/follower group commit: who commits, how the lead moves on, and what a
// panicking function does to its group.

// Callers that arrive while a group commits are queued and committed as the next group,
// led by the oldest of them; one function panicking fails its group only: the others in
// it get ErrWriteFailed and store nothing, the panic reaches the leader's caller, and
// the store goes on committing.
func TestGroupCommitLeadMovesOnAndPanicFailsOneGroup(t *testing.T) {
	s, err := storage.Open(filepath.Join(t.TempDir(), "d.db"), storage.Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Update(func(tx *storage.Tx) error { return tx.CreateProject(&storage.Project{ID: "p"}) }))
	put := func(name string) func(*storage.Tx) error {
		return func(tx *storage.Tx) error { return tx.PutQueue("p", &storage.Queue{Name: name}) }
	}

	gate, entered := make(chan struct{}), make(chan struct{})
	var release sync.Once
	defer release.Do(func() { close(gate) }) // a failed check must not leave the lead held
	leaderDone := make(chan error, 1)
	go func() {
		leaderDone <- s.Update(func(tx *storage.Tx) error {
			close(entered)
			<-gate // holds the lead: everything below queues behind it
			return put("first")(tx)
		})
	}()
	<-entered
	waitQueued := func(n int) {
		deadline := time.Now().Add(10 * time.Second)
		for s.QueuedUpdates() != n {
			require.True(t, time.Now().Before(deadline), "want %d queued, have %d", n, s.QueuedUpdates())
			time.Sleep(time.Millisecond)
		}
	}
	require.Zero(t, s.QueuedUpdates(), "the leader took its own function out of the queue")

	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_ = s.Update(func(*storage.Tx) error { panic("boom") })
	}()
	waitQueued(1)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, name := range []string{"a", "b", "c"} {
		wg.Go(func() { errs[i] = s.Update(put(name)) })
		waitQueued(2 + i)
	}

	release.Do(func() { close(gate) })
	require.NoError(t, <-leaderDone)
	require.Equal(t, "boom", <-panicked, "the panic reaches the caller that led the group it was in")
	wg.Wait()
	for i, err := range errs {
		require.ErrorIs(t, err, storage.ErrWriteFailed, "function %d shared the panicking group", i)
	}

	require.NoError(t, s.Update(put("after")), "the lead was given up: the next caller commits")
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

// Close waits for the group in progress and for every function queued behind it.
func TestCloseWaitsForQueuedGroups(t *testing.T) {
	s, err := storage.Open(filepath.Join(t.TempDir(), "d.db"), storage.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Update(func(tx *storage.Tx) error { return tx.CreateProject(&storage.Project{ID: "p"}) }))
	gate, entered := make(chan struct{}), make(chan struct{})
	var release sync.Once
	defer release.Do(func() { close(gate) })
	errs := make(chan error, 5)
	go func() {
		errs <- s.Update(func(tx *storage.Tx) error {
			close(entered)
			<-gate
			return tx.PutQueue("p", &storage.Queue{Name: "lead"})
		})
	}()
	<-entered
	for i, name := range []string{"q1", "q2", "q3", "q4"} {
		go func() {
			errs <- s.Update(func(tx *storage.Tx) error { return tx.PutQueue("p", &storage.Queue{Name: name}) })
		}()
		deadline := time.Now().Add(10 * time.Second)
		for s.QueuedUpdates() != i+1 {
			require.True(t, time.Now().Before(deadline))
			time.Sleep(time.Millisecond)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a group was being committed")
	case <-time.After(20 * time.Millisecond):
	}
	require.ErrorIs(t, s.Update(func(*storage.Tx) error { return nil }), storage.ErrClosed)
	release.Do(func() { close(gate) })
	require.NoError(t, <-closed)
	for range 5 {
		require.NoError(t, <-errs)
	}
}

// Groups hold at most MaxBatch functions: five callers queued behind a held lead commit
// as 2, 2 and 1, oldest first, each group led by its oldest caller.
func TestGroupCommitKeepsMaxBatch(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	s, err := storage.Open(filepath.Join(t.TempDir(), "d.db"), storage.Options{MaxBatch: 2, OnCommit: func(ops int, _ time.Duration) {
		mu.Lock()
		sizes = append(sizes, ops)
		mu.Unlock()
	}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Update(func(tx *storage.Tx) error { return tx.CreateProject(&storage.Project{ID: "p"}) }))
	gate, entered := make(chan struct{}), make(chan struct{})
	var release sync.Once
	defer release.Do(func() { close(gate) })
	errs := make(chan error, 6)
	go func() {
		errs <- s.Update(func(*storage.Tx) error { close(entered); <-gate; return nil })
	}()
	<-entered
	for i := range 5 {
		go func() {
			errs <- s.Update(func(tx *storage.Tx) error { return tx.PutQueue("p", &storage.Queue{Name: fmt.Sprintf("q%d", i)}) })
		}()
		deadline := time.Now().Add(10 * time.Second)
		for s.QueuedUpdates() != i+1 {
			require.True(t, time.Now().Before(deadline))
			time.Sleep(time.Millisecond)
		}
	}
	release.Do(func() { close(gate) })
	for range 6 {
		require.NoError(t, <-errs)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, 1, 2, 2, 1}, sizes, "the project, the held lead, then the five queued in groups of at most two")
}

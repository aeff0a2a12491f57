package storagetest_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/storagetest"
)

func openStore(t *testing.T) *storage.Store {
	t.Helper()
	s, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// Twice runs a write function twice and commits only the second run: a function that
// counts its runs in a captured variable sees 2, the store sees one write.
func TestTwiceRunsEachWriteTwiceAndCommitsOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	twice := storagetest.NewTwice(s)
	runs := 0
	require.NoError(t, twice.Update(func(tx *storage.Tx) error {
		runs++
		return tx.CreateProject(&storage.Project{ID: "p"})
	}))
	require.Equal(t, 2, runs)
	require.Equal(t, int64(1), twice.Updates())
	require.NoError(t, twice.View(func(tx *storage.Tx) error {
		ps, err := tx.Projects()
		require.Len(t, ps, 1, "the discarded run left nothing behind")
		return err
	}))
}

func TestFaultsFailChosenCalls(t *testing.T) {
	t.Parallel()
	f := storagetest.NewFaults(openStore(t))
	f.FailUpdates(storagetest.Nth(2))
	noop := func(*storage.Tx) error { return nil }
	require.NoError(t, f.Update(noop))
	require.ErrorIs(t, f.Update(noop), storagetest.ErrInjected)
	require.NoError(t, f.Update(noop))
	f.FailViews(func(int) bool { return true })
	require.ErrorIs(t, f.View(noop), storagetest.ErrInjected)
	hooked := false
	f.BeforeNextUpdate(func() { hooked = true })
	require.NoError(t, f.Update(noop))
	require.True(t, hooked)
}

package pg_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg/pgtest"
)

// A key PostgreSQL would refuse at commit (an index row over about 2.7 KB: 6,000 random
// bytes) is refused by the write that was given it, so in a group commit only that
// function fails: the others, committed in the same group, are stored.
func TestOversizedKeyFailsItsFunctionOnly(t *testing.T) {
	s, err := storage.OpenEngine(openEngine(t, pgtest.Shared(t).NewDatabase(t)), storage.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Update(func(tx *storage.Tx) error { return tx.CreateProject(&storage.Project{ID: "p"}) }))

	long := make([]byte, 6000)
	_, _ = rand.Read(long)
	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Update(func(tx *storage.Tx) error {
				id := fmt.Sprint("d", i)
				if i == n/2 {
					id = string(long)
				}
				return tx.PutDedup("p", id, &storage.DedupRecord{MessageID: fmt.Sprint(i)})
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i == n/2 {
			require.ErrorIs(t, err, storage.ErrKeyTooLarge)
			require.False(t, errors.Is(err, storage.ErrWriteFailed), "the function failed, not the commit")
			continue
		}
		require.NoError(t, err, "function %d", i)
	}
	require.NoError(t, s.View(func(tx *storage.Tx) error {
		for i := range n {
			if i != n/2 {
				if _, err := tx.Dedup("p", fmt.Sprint("d", i)); err != nil {
					return fmt.Errorf("d%d: %w", i, err)
				}
			}
		}
		return nil
	}))
}

package pg_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg/pgtest"
	"github.com/duraton/duraton/storage/storagetest"
)

// A database written before the retention indexes: OpenEngine builds them.
func TestOpenEngineBuildsRetentionIndexes(t *testing.T) {
	e := openEngine(t, pgtest.Shared(t).NewDatabase(t))
	old, err := storage.OpenEngine(e, storage.Options{}) // not closed: it would close e
	require.NoError(t, err)
	storagetest.BackfillPopulate(t, old)
	require.NoError(t, e.Update(storagetest.StripSweepIndexes))

	s, err := storage.OpenEngine(e, storage.Options{})
	require.NoError(t, err)
	storagetest.BackfillCheck(t, s)
}

package urlgroup

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/duraton/duraton/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T, cfg Config) *Groups {
	store, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	require.NoError(t, store.Update(func(tx *storage.Tx) error { return tx.CreateProject(&storage.Project{ID: "p"}) }))
	return New(cfg, store)
}

func TestLimits(t *testing.T) {
	t.Parallel()
	g := setup(t, Config{MaxGroups: 2, MaxEndpoints: 3})
	ep := func(u string) Endpoint { return Endpoint{URL: "http://x.test/" + u} }

	require.NoError(t, g.AddEndpoints(t.Context(), "p", "a", []Endpoint{ep("1"), ep("2")}))
	require.NoError(t, g.AddEndpoints(t.Context(), "p", "b", []Endpoint{ep("1")}))
	require.ErrorIs(t, g.AddEndpoints(t.Context(), "p", "c", []Endpoint{ep("1")}), ErrLimit, "a third group")
	require.NoError(t, g.AddEndpoints(t.Context(), "p", "a", []Endpoint{ep("2"), ep("3")}), "2 replaces itself: 3 endpoints")
	err := g.AddEndpoints(t.Context(), "p", "a", []Endpoint{ep("4")})
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorContains(t, err, "would have 4 endpoints, the limit is 3")
	got, err := g.Get(t.Context(), "p", "a")
	require.NoError(t, err)
	require.Equal(t, []Endpoint{ep("1"), ep("2"), ep("3")}, got.Endpoints, "a refused change changes nothing")
	require.ErrorIs(t, g.AddEndpoints(t.Context(), "p", "a", []Endpoint{ep("1"), ep("2"), ep("3"), ep("4")}), ErrInvalid)

	_, err = g.Get(t.Context(), "other", "a")
	require.ErrorIs(t, err, ErrNotFound, "groups are per project")
	require.ErrorIs(t, g.AddEndpoints(t.Context(), "nope", "a", []Endpoint{ep("1")}), storage.ErrNotFound, "no such project")
}

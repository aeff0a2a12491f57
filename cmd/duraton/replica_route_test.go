package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/server/console"
	"github.com/duraton/duraton/server/replica"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
)

// A request goes to its token's project's shard; a console page by its project cookie,
// a console login by the token in its form; anything else (no token, an unknown one)
// to project default's shard, whose server answers it.
func TestRouterShardOfARequest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	db := pgtest.Start(t).NewDatabase(t)
	creds := newReplicaCreds()
	tokens := makeProjects(t, db, creds, 3)
	eng, err := pg.Open(t.Context(), pg.Config{URL: db, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(func() { eng.Close() })
	rt := newRouter(eng, discardLogger())
	shardOf := func(p string) int { return pg.ShardOf(p, testShards) }
	require.NotEqual(t, shardOf("proj-0"), shardOf("default"), "the test needs a project outside default's shard")

	req := func(method, path, token string) *http.Request {
		r := httptest.NewRequest(method, path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return r
	}
	for i, tok := range tokens {
		got, err := rt.shard(req("POST", "/v2/publish/x", tok), nil)
		require.NoError(t, err)
		require.Equal(t, shardOf([]string{"proj-0", "proj-1", "proj-2"}[i]), got)
		require.True(t, rt.authorized(req("POST", "/v2/publish/x", tok)))
	}
	// A token that is not Duraton-made (no embedded project) is found by looking in
	// every shard.
	st, err := storage.OpenEngine(keepOpen{eng.ForProject("proj-1")}, storage.Options{})
	require.NoError(t, err)
	require.NoError(t, st.Update(func(tx *storage.Tx) error { return tx.PutToken(server.TokenHash("plain-token-abcdef"), "proj-1") }))
	require.NoError(t, st.Close())
	got, err := rt.shard(req("GET", "/v2/messages", "plain-token-abcdef"), nil)
	require.NoError(t, err)
	require.Equal(t, shardOf("proj-1"), got)

	for _, r := range []*http.Request{req("GET", "/v2/messages", "no-such-token"), req("GET", "/v2/messages", ""), req("GET", "/console/", "")} {
		got, err := rt.shard(r, nil)
		require.NoError(t, err)
		require.Equal(t, shardOf("default"), got, r.URL.Path)
	}
	require.False(t, rt.authorized(req("GET", "/v2/messages", "no-such-token")))

	page := req("GET", "/console/runs", "")
	page.AddCookie(&http.Cookie{Name: console.ProjectCookie, Value: "proj-1"})
	got, err = rt.shard(page, nil)
	require.NoError(t, err)
	require.Equal(t, shardOf("proj-1"), got)

	login := req("POST", "/console/login", "")
	_, err = rt.shard(login, nil)
	require.ErrorIs(t, err, replica.ErrNeedBody)
	got, err = rt.shard(login, []byte("token=+"+strings.ReplaceAll(tokens[2], "=", "%3D")+"+")) // spaces around, as pasted
	require.NoError(t, err)
	require.Equal(t, shardOf("proj-2"), got)
}

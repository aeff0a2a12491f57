package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
)

// runInProcess runs one duraton command in this process, with no DURATON_* variables set.
func runInProcess(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb, func(string) string { return "" })
	return code, out.String(), errb.String()
}

// shardedDB makes a database of n shards on a throwaway PostgreSQL, as the first replica
// started with --shards n would, and returns its URL.
func shardedDB(t *testing.T, n int) string {
	t.Helper()
	url := pgtest.Start(t).NewDatabase(t)
	eng, err := pg.Open(context.Background(), pg.Config{URL: url, MaxConns: 2, Shards: n})
	require.NoError(t, err)
	require.Equal(t, n, eng.ShardCount())
	require.NoError(t, eng.Close())
	return url
}

// projectsInShards returns, for each shard given (of n), a project name that pg.ShardOf
// puts there.
func projectsInShards(n int, shards ...int) []string {
	out := make([]string, len(shards))
	for i := 0; ; i++ {
		name := fmt.Sprintf("p%d", i)
		done := true
		for j, s := range shards {
			if out[j] == "" && pg.ShardOf(name, n) == s {
				out[j], name = name, ""
			}
			done = done && out[j] != ""
		}
		if done {
			return out
		}
	}
}

// withShardStore runs fn on the store of shard i of the database at url.
func withShardStore(t *testing.T, url string, i int, fn func(tx *storage.Tx) error) {
	t.Helper()
	eng, err := pg.Open(context.Background(), pg.Config{URL: url, MaxConns: 2})
	require.NoError(t, err)
	defer eng.Close()
	shard, err := eng.Shard(i)
	require.NoError(t, err)
	s, err := storage.OpenEngine(keepOpen{shard}, storage.Options{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Update(fn))
}

var tokenLine = regexp.MustCompile(`(?m)^token: (\S+)$`)

// TestProjectAndTokensAcrossShards: on a database of 4 shards, `project create --store`
// writes each project and its first token into the project's shard and refuses an
// existing name; `project list` lists every shard's projects with their shard; `tokens
// list` merges every shard's tokens, `tokens create` writes into the project's shard
// (an unknown project, or a token another shard holds, is refused), and `tokens revoke`
// finds a token id in whichever shard holds it, refusing a prefix that matches tokens in
// two shards.
func TestProjectAndTokensAcrossShards(t *testing.T) {
	t.Parallel()
	db := shardedDB(t, 4)
	names := projectsInShards(4, 1, 2, 3)
	tokens := map[string]string{}
	for _, name := range names {
		code, out, errOut := runInProcess(t, "project", "create", name, "--store", db)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, fmt.Sprintf("shard: %d\n", pg.ShardOf(name, 4)))
		require.Regexp(t, `(?m)^current signing key: sig_\S+$`, out)
		tokens[name] = tokenLine.FindStringSubmatch(out)[1]
		// The records are in the project's shard, and only there.
		for i := range 4 {
			withShardStore(t, db, i, func(tx *storage.Tx) error {
				_, errP := tx.Project(name)
				owner, errT := tx.TokenProject(server.TokenHash(tokens[name]))
				if i == pg.ShardOf(name, 4) {
					require.NoError(t, errP)
					require.NoError(t, errT)
					require.Equal(t, name, owner)
				} else {
					require.ErrorIs(t, errP, storage.ErrNotFound, "project %s in shard %d", name, i)
					require.ErrorIs(t, errT, storage.ErrNotFound)
				}
				return nil
			})
		}
	}
	code, _, errOut := runInProcess(t, "project", "create", names[1], "--store", db)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, fmt.Sprintf("project %q already exists (in shard %d)", names[1], pg.ShardOf(names[1], 4)))

	code, out, errOut := runInProcess(t, "project", "list", "--store", db)
	require.Equal(t, 0, code, errOut)
	for _, name := range names {
		require.Regexp(t, fmt.Sprintf(`(?m)^%s\tcreated \S+\tshard %d$`, name, pg.ShardOf(name, 4)), out)
	}
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 3, out)

	code, out, errOut = runInProcess(t, "tokens", "list", "--store", db)
	require.Equal(t, 0, code, errOut)
	for _, name := range names {
		require.Contains(t, out, server.TokenHash(tokens[name])[:tokenIDLen]+"\t"+name+"\n")
	}

	// A second token for the project of shard 3, in shard 3.
	code, out, errOut = runInProcess(t, "tokens", "create", "--project", names[2], "--store", db)
	require.Equal(t, 0, code, errOut)
	second := tokenLine.FindStringSubmatch(out)[1]
	withShardStore(t, db, 3, func(tx *storage.Tx) error {
		owner, err := tx.TokenProject(server.TokenHash(second))
		require.NoError(t, err)
		require.Equal(t, names[2], owner)
		return nil
	})
	code, _, errOut = runInProcess(t, "tokens", "create", "--project", "nosuch", "--store", db)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no project "nosuch"`)
	code, _, errOut = runInProcess(t, "tokens", "create", "--project", names[0], "--token", tokens[names[2]], "--store", db)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, fmt.Sprintf("this token already belongs to project %q", names[2]))

	// Two tokens whose ids share 8 digits, in shards 1 and 2.
	twinA, twinB := "abcdef01"+strings.Repeat("1", 56), "abcdef01"+strings.Repeat("2", 56)
	withShardStore(t, db, 1, func(tx *storage.Tx) error { return tx.PutToken(twinA, names[0]) })
	withShardStore(t, db, 2, func(tx *storage.Tx) error { return tx.PutToken(twinB, names[1]) })
	code, _, errOut = runInProcess(t, "tokens", "revoke", "abcdef01", "--store", db)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "token id abcdef01 matches 2 tokens; give more digits")
	code, out, errOut = runInProcess(t, "tokens", "revoke", "abcdef012", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "revoked token abcdef0122222222 of project "+names[1])

	// Revoke the first token of shard 3's project by its id, then by the token itself.
	id := server.TokenHash(tokens[names[2]])[:tokenIDLen]
	code, out, errOut = runInProcess(t, "tokens", "revoke", id, "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "revoked token "+id+" of project "+names[2])
	require.NotContains(t, errOut, "no token left", "the project keeps its second token")
	code, _, errOut = runInProcess(t, "tokens", "revoke", "--token", second, "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, fmt.Sprintf("project %q has no token left", names[2]))

	code, out, errOut = runInProcess(t, "tokens", "list", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "\t"+names[2]+"\n")
	require.NotContains(t, out, "abcdef0122222222")
	require.Contains(t, out, "abcdef0111111111\t"+names[0]+"\n")
	require.Contains(t, out, server.TokenHash(tokens[names[1]])[:tokenIDLen]+"\t"+names[1]+"\n")
}

// TestProjectAndTokensRefuseAFreshDatabase: the administration commands do not make a
// database no replica has opened (that would fix its number of shards at 1); they say
// to start a replica first, and leave the database empty.
func TestProjectAndTokensRefuseAFreshDatabase(t *testing.T) {
	t.Parallel()
	db := pgtest.Start(t).NewDatabase(t)
	for _, args := range [][]string{
		{"project", "create", "acme"}, {"project", "list"}, {"tokens", "list"},
		{"tokens", "create", "--project", "default"}, {"cluster", "status"},
	} {
		code, _, errOut := runInProcess(t, append(args, "--store", db)...)
		require.Equal(t, 1, code, "%v", args)
		require.Contains(t, errOut, "no replica has opened the database at --store yet: start `duraton serve --store URL --shards N` first", "%v", args)
	}
	conn, err := pgx.Connect(context.Background(), db)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var tables int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'duraton%'`).Scan(&tables))
	require.Zero(t, tables, "the commands made tables")

	code, _, errOut := runInProcess(t, "project", "list", "--store", "mysql://x")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "must be a postgres:// URL")
}

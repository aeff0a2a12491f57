package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/pg/pgtest"
)

// TestTokensOnPostgres: `duraton tokens --store postgres://...` lists, creates and
// revokes the tokens of replicas on one database while they run, and a running replica
// refuses a revoked token within its token cache's TTL (5 s) — through its followers
// too. A replica restarted with a new --token does not bring the revoked one back.
func TestTokensOnPostgres(t *testing.T) {
	skipShortReplicas(t)
	t.Parallel()
	db := pgtest.Start(t).NewDatabase(t)
	creds := newReplicaCreds()
	reps, leader := startReplicas(t, db, creds, 2)
	follower := followers(reps, leader)[0]
	client := newAPIClient(t, 10*time.Second)
	statusWith := func(r *replicaProc, token string) int {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, r.URL+"/v2/queues", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := client.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	leaked := creds.Token
	require.Equal(t, http.StatusOK, statusWith(leader, leaked))
	require.Equal(t, http.StatusOK, statusWith(follower, leaked))

	code, out, errOut := runBinary(t, "tokens", "create", "--project", "default", "--store", db)
	require.Equal(t, 0, code, errOut)
	fresh := regexp.MustCompile(`(?m)^token: (\S+)`).FindStringSubmatch(out)[1]
	require.Equal(t, http.StatusOK, statusWith(leader, fresh), "a token created beside the running leader works at once")

	code, out, errOut = runBinary(t, "tokens", "list", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 2, strings.Count(out, "\tdefault"), out)

	code, out, errOut = runBinary(t, "tokens", "revoke", "--token", leaked, "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "revoked token")
	revokedAt := time.Now()
	for _, r := range []*replicaProc{leader, follower} {
		for statusWith(r, leaked) != http.StatusUnauthorized {
			require.Less(t, time.Since(revokedAt), 15*time.Second, "the revoked token is still accepted through %s", r.URL)
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("revoked token refused %s after the revoke", time.Since(revokedAt).Round(time.Millisecond))
	require.Equal(t, http.StatusOK, statusWith(leader, fresh), "the other token still works")

	// The operator restarts the replicas with a new --token: the revoked one stays out.
	for _, r := range reps {
		r.Stop()
	}
	next := creds
	next.Token = fresh
	_, leader2 := startReplicas(t, db, next, 1)
	require.Equal(t, http.StatusOK, statusWith(leader2, fresh))
	require.Equal(t, http.StatusUnauthorized, statusWith(leader2, leaked))
	code, out, _ = runBinary(t, "tokens", "list", "--store", db)
	require.Equal(t, 0, code)
	require.Equal(t, 1, strings.Count(out, "\tdefault"), out)

	code, _, errOut = runBinary(t, "tokens", "list", "--store", "mysql://x")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "must be a postgres:// URL")
}

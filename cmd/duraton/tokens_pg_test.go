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
// too. A replica restarted with a new --token warns that the old one stays valid until
// revoked; once revoked, a restart does not bring it back.
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

	// The operator restarts the replicas with a new --token: the old one stays valid
	// (--token adds a token), and the leader says so.
	leader.Stop()
	follower.Stop()
	next := creds
	next.Token = fresh
	reps, leader = startReplicas(t, db, next, 2)
	follower = followers(reps, leader)[0]
	require.Eventually(t, func() bool { return strings.Contains(leader.stderr.String(), "other_tokens=1") },
		startupTimeout, 50*time.Millisecond, "the leader warns about the token --token did not replace")
	require.Equal(t, http.StatusOK, statusWith(follower, leaked))

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
	code, out, _ = runBinary(t, "tokens", "list", "--store", db)
	require.Equal(t, 0, code)
	require.Equal(t, 1, strings.Count(out, "\tdefault"), out)

	// The follower takes over: no warning now, and the revoked token stays out.
	leader.Stop()
	waitLeader(t, []*replicaProc{follower}, leader.epoch()+1, startupTimeout)
	require.Equal(t, http.StatusOK, statusWith(follower, fresh))
	require.Equal(t, http.StatusUnauthorized, statusWith(follower, leaked))
	require.NotContains(t, follower.stderr.String(), "other_tokens")

	code, _, errOut = runBinary(t, "tokens", "list", "--store", "mysql://x")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "must be a postgres:// URL")
}

package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/pg/pgtest"
)

// TestReplicasSurviveDatabaseOutage: PostgreSQL stops under two replicas. The leader,
// unable to renew its lease, stops itself with an error (a supervisor restarts it); the
// follower keeps polling. When the database is back the follower leads, and a message
// acknowledged before the outage (delayed, so not yet sent) is delivered once, as is one
// published after.
func TestReplicasSurviveDatabaseOutage(t *testing.T) {
	skipShortReplicas(t)
	t.Parallel()
	cluster := pgtest.Start(t)
	db := cluster.NewDatabase(t)
	ep := newLoadEndpoint(t)
	reps, leader := startReplicas(t, db, newReplicaCreds(), 2)
	fol := followers(reps, leader)[0]
	client := newAPIClient(t, 30*time.Second)

	req, err := fol.apiRequest(context.Background(), http.MethodPost, "/v2/publish/"+ep.srv.URL+"/outage", strings.NewReader("before"))
	require.NoError(t, err)
	req.Header.Set("Upstash-Delay", "2s")
	res, err := client.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)

	require.NoError(t, cluster.Pause())
	took := leader.waitSelfFenced(t, "cannot reach the database")
	t.Logf("the leader stopped itself %dms after the database did", took.Milliseconds())
	select {
	case <-fol.readDone:
		t.Fatalf("the follower exited during the outage: %v\n%s", fol.wait(), fol.stderr.String())
	default:
	}
	require.Empty(t, ep.snapshot(), "nothing was due before the outage")

	require.NoError(t, cluster.Resume())
	resumed := time.Now()
	_, ledAt := waitLeader(t, []*replicaProc{fol}, 2, startupTimeout)
	t.Logf("the follower leads %dms after the database is back", ledAt.Sub(resumed).Milliseconds())

	_, _, _, err = publishTo(context.Background(), client, fol, ep.srv.URL+"/outage", "after", "", "")
	require.NoError(t, err)
	ep.waitHits(t, "both messages answered", 30*time.Second, func(hs []hit) bool {
		got := answeredBodies(hs)
		return got["before"] && got["after"]
	})
	time.Sleep(300 * time.Millisecond) // a wrong second delivery right after would show here
	hits := ep.snapshot()
	require.Len(t, hits, 2, "each message delivered once: %+v", hits)
}

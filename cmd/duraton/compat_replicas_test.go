package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
)

// TestCompatReplicasPG runs the official-SDK suites of TestCompatQStashSDK and
// TestCompatWorkflowSDK once more, against two `duraton serve` replicas on a PostgreSQL
// database of two shards (one each: the suites' timing checks want the machine no
// busier than that), through the replica that does NOT lead project default's shard:
// every SDK call is forwarded to the other, which runs that shard's engine, and every
// delivery comes from it. The QSTASH_* variables are that replica's URL and the
// credentials the replicas were started with.
func TestCompatReplicasPG(t *testing.T) {
	const compatShards = 2
	follower := func(t *testing.T) []string {
		db := pgtest.Start(t).NewDatabase(t)
		creds := newReplicaCreds()
		reps := []*replicaProc{
			startReplica(t, db, creds, "--shards", fmt.Sprint(compatShards)),
			startReplica(t, db, creds, "--shards", fmt.Sprint(compatShards)),
		}
		per := waitShared(t, db, reps, 30*time.Second)
		home := pg.ShardOf(devProject, compatShards)
		f, leader := reps[0], reps[1]
		if slices.Contains(per[f.ID], home) {
			f, leader = leader, f
		}
		t.Logf("SDK suite through %s (%s); %s leads project default's shard %d", f.ID, f.URL, leader.ID, home)
		// A delivery's path is longer here (forwarded calls, a database round trip): the
		// rate check allows 400 ms of lag instead of 200; a limiter that let twice the
		// rate through would still show in the 600 ms windows.
		return append(f.Env(), "DURATON_RATE_TOLERANCE_MS=400")
	}
	t.Run("QStashSDK", func(t *testing.T) {
		runCompatSuite(t, func(name string) bool { return !workflowSDKFile(name) }, 1, follower)
	})
	t.Run("WorkflowSDK", func(t *testing.T) {
		runCompatSuite(t, workflowSDKFile, 4, follower)
	})
}

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
// database of testShards shards, through the replica that does NOT lead project
// default's shard: every SDK call is forwarded to the other, which runs that shard's
// engine, and every delivery comes from it. The QSTASH_* variables are that replica's
// URL and the credentials the replicas were started with.
func TestCompatReplicasPG(t *testing.T) {
	follower := func(t *testing.T) []string {
		db := pgtest.Start(t).NewDatabase(t)
		creds := newReplicaCreds()
		reps := []*replicaProc{
			startReplica(t, db, creds, "--shards", fmt.Sprint(testShards)),
			startReplica(t, db, creds, "--shards", fmt.Sprint(testShards)),
		}
		per := waitShared(t, db, reps, 30*time.Second)
		home := pg.ShardOf(devProject, testShards)
		f, leader := reps[0], reps[1]
		if slices.Contains(per[f.ID], home) {
			f, leader = leader, f
		}
		t.Logf("SDK suite through %s (%s); %s leads project default's shard %d", f.ID, f.URL, leader.ID, home)
		return f.Env()
	}
	t.Run("QStashSDK", func(t *testing.T) {
		runCompatSuite(t, func(name string) bool { return !workflowSDKFile(name) }, 1, follower)
	})
	t.Run("WorkflowSDK", func(t *testing.T) {
		runCompatSuite(t, workflowSDKFile, 4, follower)
	})
}

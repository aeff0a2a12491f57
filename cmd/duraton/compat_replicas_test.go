package main

import (
	"testing"

	"github.com/duraton/duraton/storage/pg/pgtest"
)

// TestCompatReplicasPG runs the official-SDK suites of TestCompatQStashSDK and
// TestCompatWorkflowSDK once more, against a FOLLOWER of two `duraton serve` replicas on
// PostgreSQL: every SDK call is forwarded to the leader, which runs the engine on the
// PostgreSQL store, and every delivery comes from it. The QSTASH_* variables are the
// follower's URL and the credentials the replicas were started with.
func TestCompatReplicasPG(t *testing.T) {
	follower := func(t *testing.T) []string {
		db := pgtest.Start(t).NewDatabase(t)
		reps, leader := startReplicas(t, db, newReplicaCreds(), 2)
		f := followers(reps, leader)[0]
		t.Logf("SDK suite against follower %s (%s); leader %s", f.ID, f.URL, leader.ID)
		return f.Env()
	}
	t.Run("QStashSDK", func(t *testing.T) {
		runCompatSuite(t, func(name string) bool { return !workflowSDKFile(name) }, 1, follower)
	})
	t.Run("WorkflowSDK", func(t *testing.T) {
		runCompatSuite(t, workflowSDKFile, 4, follower)
	})
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
)

// clusterJSON runs `duraton cluster status --json` on db and decodes its output, checking
// that it has exactly the documented keys.
func clusterJSON(t *testing.T, db string) clusterStatus {
	t.Helper()
	code, out, errOut := runInProcess(t, "cluster", "status", "--store", db, "--json")
	require.Equal(t, 0, code, errOut)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(out), &raw), out)
	require.ElementsMatch(t, []string{"shards", "replicas", "unled"}, keysOf(raw), out)
	var reps []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw["replicas"], &reps))
	for _, r := range reps {
		require.ElementsMatch(t, []string{"address", "id", "shards", "epochs"}, keysOf(r), out)
	}
	var st clusterStatus
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	return st
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// waitClusterStatus polls `cluster status --json` until cond holds.
func waitClusterStatus(t *testing.T, db, what string, cond func(clusterStatus) bool) clusterStatus {
	t.Helper()
	deadline := time.Now().Add(2 * startupTimeout)
	for {
		st := clusterJSON(t, db)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster status never showed %s; last: %+v", what, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestClusterStatusTwoReplicas: two real replicas on a database of 8 shards share them
// out 4 and 4; `cluster status --json` shows each with its address, id, shards and
// epochs, and none unled; the text form shows the same as a table.
func TestClusterStatusTwoReplicas(t *testing.T) {
	skipShortReplicas(t)
	t.Parallel()
	db := pgtest.Start(t).NewDatabase(t)
	creds := newReplicaCreds()
	a := startReplica(t, db, creds, "--shards", "8")
	b := startReplica(t, db, creds, "--shards", "8")
	st := waitClusterStatus(t, db, "8 shards led 4 and 4", func(st clusterStatus) bool {
		return len(st.Unled) == 0 && len(st.Replicas) == 2 && len(st.Replicas[0].Shards) == 4 && len(st.Replicas[1].Shards) == 4
	})
	require.Equal(t, 8, st.Shards)
	byID := map[string]*replicaProc{a.ID: a, b.ID: b}
	var all []int
	for _, r := range st.Replicas {
		p, ok := byID[r.ID]
		require.True(t, ok, "replica %s is not one of the test's", r.ID)
		require.Equal(t, p.URL, r.Address)
		require.True(t, slices.IsSorted(r.Shards))
		require.Len(t, r.Epochs, len(r.Shards))
		for _, s := range r.Shards {
			require.GreaterOrEqual(t, r.Epochs[strconv.Itoa(s)], int64(1), "shard %d", s)
		}
		all = append(all, r.Shards...)
	}
	slices.Sort(all)
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, all, "every shard led by exactly one")

	code, out, errOut := runInProcess(t, "cluster", "status", "--store", db)
	require.Equal(t, 0, code, errOut)
	t.Logf("cluster status:\n%s", out)
	require.Contains(t, out, "8 shards: 8 led, 0 unled; 2 replicas")
	require.Contains(t, out, "every shard is led")
	for _, r := range st.Replicas {
		var parts []string
		for _, s := range r.Shards {
			parts = append(parts, fmt.Sprintf("%d (%d)", s, r.Epochs[strconv.Itoa(s)]))
		}
		require.Regexp(t, fmt.Sprintf(`(?m)^%s +%s +4 +%s$`, r.ID, r.Address, regexpQuote(strings.Join(parts, ", "))), out)
	}
}

func regexpQuote(s string) string {
	return strings.NewReplacer("(", `\(`, ")", `\)`).Replace(s)
}

// TestClusterStatusUnled: on a database whose shards no replica leads, every shard is
// unled and no replica listed; a lease that expired is shown with its last holder, and a
// live replica that leads nothing is in the table only, with no shards.
func TestClusterStatusUnled(t *testing.T) {
	t.Parallel()
	db := shardedDB(t, 4)
	st := clusterJSON(t, db)
	require.Equal(t, clusterStatus{Shards: 4, Replicas: []replicaStatus{}, Unled: []int{0, 1, 2, 3}}, withoutExpired(st))
	code, out, errOut := runInProcess(t, "cluster", "status", "--store", db)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "4 shards: 0 led, 4 unled; 0 replicas")
	require.Contains(t, out, "  shard 3: free\n")

	st = buildClusterStatus(4, []pg.ShardLease{
		{Shard: 0, Holder: "r-a", Addr: "http://a", Epoch: 3, Live: true},
		{Shard: 1, Holder: "r-b", Addr: "http://b", Epoch: 2, Live: false},
		{Shard: 2},
		{Shard: 3, Holder: "r-a", Addr: "http://a", Epoch: 1, Live: true},
	}, []pg.Replica{{ID: "r-c", Addr: "http://c", Live: true}, {ID: "r-b", Addr: "http://b", Live: false}})
	require.Equal(t, []replicaStatus{
		{Address: "http://a", ID: "r-a", Shards: []int{0, 3}, Epochs: map[string]int64{"0": 3, "3": 1}},
	}, st.Replicas, "the JSON form: only replicas that lead")
	require.Equal(t, []int{1, 2}, st.Unled)
	var b strings.Builder
	require.NoError(t, st.writeText(&b))
	require.Contains(t, b.String(), "  shard 1: the lease of r-b (epoch 2) expired\n  shard 2: free\n")
	require.Regexp(t, `(?m)^r-c +http://c +0 +-$`, b.String())
}

func withoutExpired(st clusterStatus) clusterStatus {
	st.expired = nil
	return st
}

// TestProjectCreateOnRunningReplica: `duraton project create --store` beside a running
// replica of 4 shards makes a project the replica serves at once: a publish with the new
// token is accepted (201) and delivered.
func TestProjectCreateOnRunningReplica(t *testing.T) {
	skipShortReplicas(t)
	t.Parallel()
	db := pgtest.Start(t).NewDatabase(t)
	r := startReplica(t, db, newReplicaCreds(), "--shards", "4")
	waitClusterStatus(t, db, "4 shards led", func(st clusterStatus) bool { return len(st.Unled) == 0 })
	// A project whose shard is not default's, so that the replica must route it.
	name := projectsInShards(4, (pg.ShardOf(devProject, 4)+1)%4)[0]

	code, out, errOut := runBinary(t, "project", "create", name, "--store", db)
	require.Equal(t, 0, code, errOut)
	token := tokenLine.FindStringSubmatch(out)[1]

	ep := newLoadEndpoint(t)
	client := newAPIClient(t, 10*time.Second)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, r.URL+"/v2/publish/"+ep.srv.URL+"/new", strings.NewReader("hello "+name))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "text/plain")
	res, err := client.Do(req)
	require.NoError(t, err)
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode, "%s", raw)
	ep.waitHits(t, "the new project's message", startupTimeout, func(hits []hit) bool {
		return slices.ContainsFunc(hits, func(h hit) bool { return h.body == "hello "+name })
	})
}

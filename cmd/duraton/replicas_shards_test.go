package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/pg"
	"github.com/duraton/duraton/storage/pg/pgtest"
)

// Replicas leading shards: the shards are shared out evenly, a SIGKILLed replica's
// shards are taken over within TTL + grace, a replica that joins under load takes its
// share by clean hand-overs, and neither loses or doubles a delivery or lets a limit be
// exceeded at the endpoint.

const testShards = 8

// makeProjects makes n projects (proj-0 …) with creds' signing keys in the database at
// db (divided into testShards shards if new) and returns their tokens.
func makeProjects(t *testing.T, db string, creds replicaCreds, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("proj-%d", i)
	}
	tokens, err := makeShardProjects(context.Background(), db, testShards, ids, creds.CurrentKey, creds.NextKey)
	require.NoError(t, err)
	return tokens
}

// shardLeases reads who leads each shard.
func shardLeases(t *testing.T, db string) []pg.ShardLease {
	t.Helper()
	eng, err := pg.Open(context.Background(), pg.Config{URL: db, MaxConns: 1})
	require.NoError(t, err)
	defer eng.Close()
	leases, err := eng.Leases(context.Background())
	require.NoError(t, err)
	return leases
}

// waitShared waits until every shard is led by one of reps and each leads its even
// share (±1); it returns each replica's shards.
func waitShared(t *testing.T, db string, reps []*replicaProc, timeout time.Duration) map[string][]int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		per := map[string][]int{}
		ok := true
		leases := shardLeases(t, db)
		shards := len(leases)
		for _, l := range leases {
			if !l.Live || l.Holder == "" {
				ok = false
				continue
			}
			per[l.Holder] = append(per[l.Holder], l.Shard)
		}
		for _, r := range reps {
			if n := len(per[r.ID]); n < shards/len(reps) || n > (shards+len(reps)-1)/len(reps) {
				ok = false
			}
		}
		if ok && len(per) == len(reps) {
			return per
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shards were not shared out among %d replicas within %s: %v", len(reps), timeout, per)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestShardedReplicasKillAndJoin(t *testing.T) {
	skipShortReplicas(t)
	t.Parallel()
	const projects = 6
	db := pgtest.Start(t).NewDatabase(t)
	creds := newReplicaCreds()
	tokens := makeProjects(t, db, creds, projects)
	ep := newLoadEndpoint(t)
	var reps []*replicaProc
	for range 3 {
		reps = append(reps, startReplica(t, db, creds, "--shards", fmt.Sprint(testShards)))
	}
	per := waitShared(t, db, reps, 30*time.Second)
	t.Logf("shards: %v", per)
	client := newAPIClient(t, 30*time.Second)
	dest := ep.srv.URL + "/sharded"
	key := "sk-" + randomTag(t) // one key name; each project's is its own

	// Load: a publish every 25 ms, round-robin over the live replicas and the projects.
	type rec struct {
		body, msgID string
		began       time.Time
		err         error
		via         *replicaProc
	}
	var (
		mu    sync.Mutex
		recs  []*rec
		alive = append([]*replicaProc(nil), reps...)
		wg    sync.WaitGroup
	)
	stopLoad, loadDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(loadDone)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				wg.Wait()
				return
			case <-tick.C:
			}
			mu.Lock()
			r := &rec{body: fmt.Sprintf("p%d-b%04d", i%projects, i), via: alive[i%len(alive)], began: time.Now()}
			recs = append(recs, r)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, id, _, err := publishAs(context.Background(), client, r.via, tokens[i%projects], dest, r.body, key, replicaFlowValue)
				mu.Lock()
				r.msgID, r.err = id, err
				mu.Unlock()
			}()
		}
	}()

	// SIGKILL a replica while a delivery is open at the endpoint.
	ep.waitHits(t, "a delivery open after 20 answered", 30*time.Second, func(hs []hit) bool {
		if len(answeredBodies(hs)) < 20 {
			return false
		}
		for _, h := range hs {
			if h.end.IsZero() && time.Since(h.at) < 20*time.Millisecond {
				return true
			}
		}
		return false
	})
	victim := reps[0]
	mu.Lock()
	alive = reps[1:]
	mu.Unlock()
	victim.Kill()
	killAt := time.Now()
	after := waitShared(t, db, reps[1:], replicaTTL+replicaGrace+30*time.Second)
	movedAt := time.Now()
	t.Logf("%s SIGKILLed (it led %v); its shards moved within %dms (TTL %s + grace %s): %v",
		victim.ID, per[victim.ID], movedAt.Sub(killAt).Milliseconds(), replicaTTL, replicaGrace, after)
	require.LessOrEqual(t, movedAt.Sub(killAt), replicaTTL+replicaGrace+replicaTTL/5+2*time.Second,
		"the dead replica's shards move within TTL + grace (+ a balance round and 2 s)")

	// A replica joins under load and takes its share by hand-overs.
	joiner := startReplica(t, db, creds, "--shards", fmt.Sprint(testShards))
	live := []*replicaProc{reps[1], reps[2], joiner}
	mu.Lock()
	alive = live
	mu.Unlock()
	joinAt := time.Now()
	joined := waitShared(t, db, live, 60*time.Second)
	t.Logf("%s joined and leads %v after %dms: %v", joiner.ID, joined[joiner.ID], time.Since(joinAt).Milliseconds(), joined)
	time.Sleep(1500 * time.Millisecond) // more load on the new layout
	close(stopLoad)
	<-loadDone

	acked := map[string]string{}
	for _, r := range recs {
		switch {
		case r.msgID != "":
			acked[r.msgID] = r.body
		case r.via == victim:
			// Sent to the replica that was killed: may never have been acknowledged.
		default:
			t.Errorf("publish %s through live %s failed: %v", r.body, r.via.ID, r.err)
		}
	}
	want := map[string]bool{}
	for _, b := range acked {
		want[b] = true
	}
	ep.waitHits(t, "every acknowledged message answered", 60*time.Second, func(hs []hit) bool {
		got := answeredBodies(hs)
		for b := range want {
			if !got[b] {
				return false
			}
		}
		return true
	})
	time.Sleep(500 * time.Millisecond) // a wrong extra delivery right after the last would show here
	hits := ep.snapshot()
	timeline := hitTimeline(hits, map[string]time.Time{"SIGKILL": killAt, "shards moved": movedAt, "join": joinAt})

	// Twice only what the dead replica had in flight: a hand-over drains, so it doubles
	// nothing.
	per2 := map[string][]hit{}
	for _, h := range hits {
		per2[h.msgID] = append(per2[h.msgID], h)
	}
	dups := 0
	for id, hs := range per2 {
		if len(hs) == 1 {
			continue
		}
		dups++
		require.Len(t, hs, 2, "message %s sent at most once more\n%s", id, timeline)
		// Open at the kill, or answered just before it but not yet recorded.
		require.True(t, hs[0].at.Before(killAt), "message %s sent twice, but first after the kill\n%s", id, timeline)
		project, _, _ := strings.Cut(hs[0].body, "-")
		require.Contains(t, per[victim.ID], pg.ShardOf("proj-"+strings.TrimPrefix(project, "p"), testShards),
			"message %s sent twice, but its shard was not the dead replica's\n%s", id, timeline)
	}
	// Each project's limits held at the endpoint.
	for p := range projects {
		var mine []hit
		for _, h := range hits {
			if strings.HasPrefix(h.body, fmt.Sprintf("p%d-", p)) {
				mine = append(mine, h)
			}
		}
		require.NotEmpty(t, mine)
		checkFlowLimits(t, mine, timeline)
	}
	t.Logf("%d publishes, %d acknowledged, %d requests at the endpoint, %d messages sent twice (open at the kill)",
		len(recs), len(acked), len(hits), dups)

	// Each replica's /metrics: the shards it leads, and its delivery attempts by shard,
	// only of shards it led.
	final := waitShared(t, db, live, 10*time.Second)
	total := 0
	for _, r := range live {
		status, body, _ := getVia(t, client, r, "/metrics")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, body, fmt.Sprintf("duraton_replica_shards_led %d\n", len(final[r.ID])))
		for _, m := range regexp.MustCompile(`(?m)^duraton_shard_delivery_attempts_total\{shard="(\d+)"\} (\d+)$`).FindAllStringSubmatch(body, -1) {
			n, _ := strconv.Atoi(m[2])
			total += n
		}
	}
	require.Positive(t, total, "the live replicas count their attempts by shard")
}

// waitServing waits until replica r says it leads each of shards (its engine for the
// shard has started and serves).
func waitServing(t *testing.T, r *replicaProc, shards []int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, s := range shards {
		line := regexp.MustCompile(fmt.Sprintf(`(?m)^leading shard %d \(epoch \d+\)$`, s))
		for !line.MatchString(r.stdout.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not serve shard %d after %s", r.ID, s, timeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// pgProxy forwards TCP connections to a PostgreSQL server until cut: then it closes the
// connections it carries and refuses new ones, as a network partition would.
type pgProxy struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func newPGProxy(t *testing.T, to string) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &pgProxy{ln: ln, to: to}
	t.Cleanup(func() { ln.Close(); p.partition() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// partition cuts the replica behind the proxy off the database.
func (p *pgProxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
}

// TestShardedReplicaPartitionFenced: a replica cut off from PostgreSQL cannot renew its
// shards' leases, so it stops itself (4/5 of the TTL after its last renewal) before
// any other replica may take those shards (TTL + grace after it, by the database's
// clock); the other replica then leads every shard, and serves the cut-off replica's
// projects.
func TestShardedReplicaPartitionFenced(t *testing.T) {
	skipShortReplicas(t)
	t.Parallel()
	db := pgtest.Start(t).NewDatabase(t)
	creds := newReplicaCreds()
	tokens := makeProjects(t, db, creds, 4)
	u, err := url.Parse(db)
	require.NoError(t, err)
	proxy := newPGProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.ln.Addr().String()

	a := startReplica(t, db, creds, "--shards", fmt.Sprint(testShards))
	b := startReplica(t, db, creds, "--shards", fmt.Sprint(testShards), "--store", viaProxy.String()) // the later --store wins
	per := waitShared(t, db, []*replicaProc{a, b}, 30*time.Second)
	t.Logf("shards: %v", per)
	waitServing(t, b, per[b.ID], 30*time.Second) // its engines run: the cut comes to a leader

	proxy.partition()
	cutAt := time.Now()
	fencedAfter := b.waitSelfFenced(t, "was cut off from the database")
	exitedAt := time.Now()
	all := waitShared(t, db, []*replicaProc{a}, replicaTTL+replicaGrace+30*time.Second)
	takenAt := time.Now()
	t.Logf("cut off: %s stopped itself after %dms; %s leads %v %dms after the cut",
		b.ID, fencedAfter.Milliseconds(), a.ID, all[a.ID], takenAt.Sub(cutAt).Milliseconds())
	require.True(t, exitedAt.Before(takenAt), "the cut-off replica stopped before its shards were taken")
	require.Len(t, all[a.ID], testShards)

	// Every project is served again, through the remaining replica.
	ep := newLoadEndpoint(t)
	client := newAPIClient(t, 30*time.Second)
	for i, tok := range tokens {
		status, _, _, err := publishAs(context.Background(), client, a, tok, ep.srv.URL+"/after", fmt.Sprintf("p%d", i), "", "")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, status)
	}
	ep.waitHits(t, "every project's message answered", 30*time.Second, func(hs []hit) bool { return len(answeredBodies(hs)) == len(tokens) })
}

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/pg/pgtest"
)

// TestReplicaFencedAfterLeaseStolen: a leader that lost its lease while alive (here taken
// by hand in SQL, as a partitioned leader's would be by a follower) cannot record what it
// does after: the delivery it had open is answered, but its completion is refused by the
// database (fenced by the epoch), it stops itself with an error, and the next leader sends
// the message again, without spending a retry, and records it delivered once.
func TestReplicaFencedAfterLeaseStolen(t *testing.T) {
	skipShortReplicas(t)
	t.Parallel()
	db := pgtest.Start(t).NewDatabase(t)

	type seen struct{ msgID, retried string }
	var (
		mu    sync.Mutex
		hits  []seen
		first = make(chan struct{}) // closed: the first request is answered
	)
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, seen{r.Header.Get("Upstash-Message-Id"), r.Header.Get("Upstash-Retried")})
		n := len(hits)
		mu.Unlock()
		if n == 1 {
			select {
			case <-first:
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer ep.Close()
	snapshot := func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), hits...)
	}
	waitHits := func(n int, within time.Duration) []seen {
		t.Helper()
		deadline := time.Now().Add(within)
		for len(snapshot()) < n {
			require.True(t, time.Now().Before(deadline), "the endpoint saw %d requests, want %d", len(snapshot()), n)
			time.Sleep(5 * time.Millisecond)
		}
		return snapshot()
	}

	creds := newReplicaCreds()
	client := newAPIClient(t, 30*time.Second)
	old := startReplica(t, db, creds)
	waitLeader(t, []*replicaProc{old}, 1, startupTimeout)
	_, id, _, err := publishTo(context.Background(), client, old, ep.URL+"/fenced", "payload", "", "")
	require.NoError(t, err)
	waitHits(1, 30*time.Second) // the delivery is open at the endpoint

	// The lease is taken from under the live leader, expired so that the next replica
	// takes it at once.
	conn, err := pgx.Connect(context.Background(), db)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), `UPDATE duraton_shards
		SET holder = 'thief', addr = '', epoch = epoch + 1, lease_until = clock_timestamp() - interval '1 hour' WHERE shard = 0`)
	require.NoError(t, err)
	close(first) // the old leader gets its answer now, and cannot record it

	old.waitSelfFenced(t, "its lease was taken")

	next := startReplica(t, db, creds)
	waitLeader(t, []*replicaProc{next}, 3, startupTimeout) // epoch 2 was the thief's
	hs := waitHits(2, 30*time.Second)
	require.Equal(t, seen{id, "0"}, hs[1], "the new leader sends the message again, no retry spent")

	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body, _ := getVia(t, client, next, "/v2/logs?messageId="+id)
		require.Equal(t, http.StatusOK, status, body)
		if strings.Contains(body, `"state":"DELIVERED"`) {
			require.Equal(t, 1, strings.Count(body, `"state":"DELIVERED"`), "delivered once in the record: %s", body)
			break
		}
		require.True(t, time.Now().Before(deadline), "the message is never recorded delivered: %s", body)
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a wrong third delivery right after would show here
	require.Len(t, snapshot(), 2)
}

// waitSelfFenced waits for a leader to stop itself after losing its lease (it renews
// every TTL/5 and gives up after 4/5 TTL): it must exit with an error saying so. It
// returns how long that took.
func (r *replicaProc) waitSelfFenced(t *testing.T, why string) time.Duration {
	t.Helper()
	from := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- r.wait() }()
	select {
	case err := <-exited:
		r.ended = true
		require.Error(t, err, "a leader that %s exits with an error", why)
	case <-time.After(replicaTTL + 5*time.Second):
		t.Fatalf("the leader is still running %s after %s", replicaTTL+5*time.Second, why)
	}
	require.Contains(t, r.stderr.String(), "leader lease lost")
	return time.Since(from)
}

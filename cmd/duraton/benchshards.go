package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/server/servertest"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg"
)

// Benchmarks over shards: `--projects P` spreads the load over P projects (made in the
// database before the replicas start, with the bench's signing keys and a token each),
// so that it falls on every shard; `--shards S` is the replicas' shard count. The result
// then says how the shards and the deliveries divided among the replicas.

// replicaShare is one replica's part of a benchmark on replicas.
type replicaShare struct {
	Shards     int   `json:"shards"`
	Deliveries int64 `json:"deliveries"` // delivery attempts over the measured interval
	CPUUs      int64 `json:"cpu_us"`
}

// benchProjectTokens makes projects bench-000 … in the database at store (divided into
// shards if it is new) and returns their tokens. n 0: none (the default project's token
// is used).
func benchProjectTokens(ctx context.Context, store string, shards, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%03d", i)
	}
	return makeShardProjects(ctx, store, shards, ids, servertest.CurrentKey, servertest.NextKey)
}

// makeShardProjects makes the projects ids, with the signing keys given and a token
// each, each in its shard of the database at store (divided into shards if it is new),
// and returns their tokens in the order of ids.
func makeShardProjects(ctx context.Context, store string, shards int, ids []string, currentKey, nextKey string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	eng, err := pg.Open(ctx, pg.Config{URL: store, MaxConns: 4, Shards: shards})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	tokens := make([]string, len(ids))
	for i, id := range ids {
		st, err := storage.OpenEngine(keepOpen{eng.ForProject(id)}, storage.Options{})
		if err != nil {
			return nil, err
		}
		tokens[i] = newToken(id)
		_, err = delivery.EnsureProject(ctx, st, delivery.Project{ID: id, Name: id, CreatedAt: time.Now().UnixMilli(),
			CurrentSigningKey: currentKey, NextSigningKey: nextKey}, server.TokenHash(tokens[i]))
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("make project %s: %w", id, err)
		}
	}
	return tokens, nil
}

// waitShardsShared waits until every shard of the database is led and each of the n
// replicas leads its even share (±1).
func waitShardsShared(ctx context.Context, store string, n int, timeout time.Duration) error {
	eng, err := pg.Open(ctx, pg.Config{URL: store, MaxConns: 2})
	if err != nil {
		return err
	}
	defer eng.Close()
	deadline := time.Now().Add(timeout)
	for {
		leases, err := eng.Leases(ctx)
		if err != nil {
			return err
		}
		per := map[string]int{}
		led := 0
		for _, l := range leases {
			if l.Live && l.Holder != "" {
				per[l.Holder]++
				led++
			}
		}
		even := len(per) == min(n, len(leases)) && led == len(leases)
		for _, c := range per {
			if c < len(leases)/n || c > (len(leases)+n-1)/n {
				even = false
			}
		}
		if even {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %d shards were not shared out among %d replicas within %s (led: %d, per replica: %v)", len(leases), n, timeout, led, per)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// shares reads each replica's shards and delivery attempts from its /metrics, and its
// CPU time.
func (rs *benchReplicas) shares(ctx context.Context) ([]replicaShare, error) {
	out := make([]replicaShare, len(rs.procs))
	for i, p := range rs.procs {
		cpu, err := procCPUUs(p.Process.Pid)
		if err != nil {
			return nil, err
		}
		out[i].CPUUs = cpu
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rs.byProc[i]+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("replica metrics: %w", err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			name, value, ok := strings.Cut(line, " ")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				continue
			}
			switch {
			case name == "duraton_replica_shards_led":
				out[i].Shards = int(v)
			case strings.HasPrefix(name, "duraton_shard_delivery_attempts_total{"):
				out[i].Deliveries += int64(v)
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// shareDelta is what each replica did between two reads of shares.
func shareDelta(before, after []replicaShare) ([]replicaShare, error) {
	if len(before) != len(after) {
		return nil, errors.New("replica shares: the replicas changed")
	}
	out := make([]replicaShare, len(after))
	for i := range after {
		out[i] = replicaShare{Shards: after[i].Shards, Deliveries: after[i].Deliveries - before[i].Deliveries,
			CPUUs: after[i].CPUUs - before[i].CPUUs}
	}
	return out, nil
}

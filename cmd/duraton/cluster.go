package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/duraton/duraton/storage/pg"
)

const clusterUsage = `usage: duraton cluster status --store postgres://... [--json]`

// clusterStatus is what `duraton cluster status` shows: the replicas that lead a shard or
// are alive, the shards each leads with their epochs, and the shards nobody leads now.
// Its JSON form is the command's --json output.
type clusterStatus struct {
	Shards   int                   `json:"shards"`
	Replicas []replicaStatus       `json:"replicas"`
	Unled    []int                 `json:"unled"`
	expired  map[int]pg.ShardLease // unled shards that a replica held, by shard (text form)
	idle     []replicaStatus       // live replicas that lead nothing (text form only)
}

// replicaStatus is one replica of clusterStatus.
type replicaStatus struct {
	Address string           `json:"address"`
	ID      string           `json:"id"`
	Shards  []int            `json:"shards"`
	Epochs  map[string]int64 `json:"epochs"` // shard (as a JSON key) → the epoch it leads with
}

// runCluster is `duraton cluster status`: read the shards' leases and the replicas'
// membership from the PostgreSQL database replicas share. It only reads.
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || args[0] != "status" {
		fmt.Fprintln(stderr, clusterUsage)
		return errUsage
	}
	fs := flag.NewFlagSet("cluster status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeURL := fs.String("store", env(getenv).str("DURATON_STORE", ""), "postgres://... of the database replicas share (DURATON_STORE)")
	asJSON := fs.Bool("json", false, `print JSON: {"shards": N, "replicas": [{"address", "id", "shards", "epochs"}], "unled": [...]}`)
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, clusterUsage)
		return errUsage
	}
	if *storeURL == "" {
		return fmt.Errorf("cluster status: --store (DURATON_STORE) is required: the postgres:// URL of the replicas' database")
	}
	eng, err := openShardedDB(ctx, *storeURL)
	if err != nil {
		return err
	}
	defer eng.Close()
	leases, err := eng.Leases(ctx)
	if err != nil {
		return err
	}
	members, err := eng.Replicas(ctx)
	if err != nil {
		return err
	}
	st := buildClusterStatus(eng.ShardCount(), leases, members)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(st) // one line
	}
	return st.writeText(stdout)
}

// buildClusterStatus puts the leases and membership rows together. A shard is led when
// its lease has a holder and has not expired by the database's clock. A replica is listed
// when it leads a shard or its membership is alive (it may be waiting for its share); its
// address is its lease's, or its membership's when it leads nothing.
func buildClusterStatus(shards int, leases []pg.ShardLease, members []pg.Replica) clusterStatus {
	st := clusterStatus{Shards: shards, Replicas: []replicaStatus{}, Unled: []int{}, expired: map[int]pg.ShardLease{}}
	byID := map[string]int{} // replica id → index in st.Replicas
	add := func(id, addr string) *replicaStatus {
		if i, ok := byID[id]; ok {
			return &st.Replicas[i]
		}
		byID[id] = len(st.Replicas)
		st.Replicas = append(st.Replicas, replicaStatus{Address: addr, ID: id, Shards: []int{}, Epochs: map[string]int64{}})
		return &st.Replicas[len(st.Replicas)-1]
	}
	for _, l := range leases {
		if l.Holder == "" || !l.Live {
			st.Unled = append(st.Unled, l.Shard)
			if l.Holder != "" {
				st.expired[l.Shard] = l
			}
			continue
		}
		r := add(l.Holder, l.Addr)
		r.Shards = append(r.Shards, l.Shard)
		r.Epochs[strconv.Itoa(l.Shard)] = l.Epoch
	}
	// The JSON form lists only the replicas that lead (hold a live lease); the table
	// also shows the live ones that lead nothing yet (joining, or more than the shards).
	for _, m := range members {
		if _, leads := byID[m.ID]; m.Live && !leads {
			st.idle = append(st.idle, replicaStatus{Address: m.Addr, ID: m.ID, Shards: []int{}, Epochs: map[string]int64{}})
		}
	}
	slices.SortFunc(st.Replicas, func(a, b replicaStatus) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// writeText prints the status as a table.
func (st clusterStatus) writeText(w io.Writer) error {
	led := st.Shards - len(st.Unled)
	fmt.Fprintf(w, "%d shards: %d led, %d unled; %d replicas\n\n", st.Shards, led, len(st.Unled), len(st.Replicas)+len(st.idle))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tADDRESS\tLEADS\tSHARDS (EPOCH)")
	for _, r := range append(slices.Clone(st.Replicas), st.idle...) {
		var parts []string
		for _, s := range r.Shards {
			parts = append(parts, fmt.Sprintf("%d (%d)", s, r.Epochs[strconv.Itoa(s)]))
		}
		list := strings.Join(parts, ", ")
		if list == "" {
			list = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.ID, r.Address, len(r.Shards), list)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Unled) == 0 {
		_, err := fmt.Fprintln(w, "\nevery shard is led")
		return err
	}
	fmt.Fprintln(w, "\nnobody leads:")
	for _, s := range st.Unled {
		if l, ok := st.expired[s]; ok {
			fmt.Fprintf(w, "  shard %d: the lease of %s (epoch %d) expired\n", s, l.Holder, l.Epoch)
		} else {
			fmt.Fprintf(w, "  shard %d: free\n", s)
		}
	}
	return nil
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/server/metrics"
	"github.com/duraton/duraton/server/replica"
	"github.com/duraton/duraton/storage/kv"
	"github.com/duraton/duraton/storage/pg"
)

// Replicas on PostgreSQL. Every replica serves the whole API. The database is divided
// into shards (storage/pg shards.go), a project into one of them; each shard has a
// lease, and the replica that holds it runs that shard's delivery engine (a node of its
// own: scheduler, dispatcher, sweeps, API) over the shard's buckets. The replicas share
// the shards out evenly (replica_shards.go), and each forwards a request to the leader
// of its project's shard (server/replica, routed by replica_route.go). So every limit of
// a project is enforced by one scheduler and is exact across replicas, and a shard's
// epoch fences its leader's writes: a replica that lost a shard's lease cannot write to
// it after another took over.
//
// Liveness: a shard's leader renews its lease every TTL/5. It fences itself (the process
// exits, cancelling its deliveries) when no renewal has succeeded for TTL - TTL/5 by its
// monotonic clock, while another replica takes the shard over only once the lease has
// been expired for the grace period by the database's clock. A replica that takes a
// shard over starts its engine as at any start-up: deliveries the dead leader had in
// flight go back to their waitlists with their slots given back, and are sent again
// without spending a retry.

// validateReplicaFlags checks the PostgreSQL replica flags.
func validateReplicaFlags(f *serverFlags) error {
	if f.Store == "" {
		return nil
	}
	if err := checkStoreURL(f.Store); err != nil {
		return err
	}
	if f.LeaseTTL < time.Second || f.LeaseTTL > 5*time.Minute {
		return fmt.Errorf("--lease-ttl (DURATON_LEASE_TTL) must be between 1s and 5m, got %s", f.LeaseTTL)
	}
	if f.LeaseGrace < 0 || f.LeaseGrace > f.LeaseTTL {
		return fmt.Errorf("--lease-grace (DURATON_LEASE_GRACE) must be between 0 and --lease-ttl, got %s", f.LeaseGrace)
	}
	if least := max(f.MaxBodyBytes, 16<<20); f.FollowerBufferBytes < least || f.FollowerBufferBytes > 64<<30 {
		return fmt.Errorf("--follower-buffer-bytes (DURATON_FOLLOWER_BUFFER_BYTES) must be between %d (the largest body) and %d, got %d", least, int64(64<<30), f.FollowerBufferBytes)
	}
	if f.Shards < 1 || f.Shards > pg.MaxShards {
		return fmt.Errorf("--shards (DURATON_SHARDS) must be between 1 and %d, got %d", pg.MaxShards, f.Shards)
	}
	if f.PGMaxConns < 2 || f.PGMaxConns > 1000 {
		return fmt.Errorf("--pg-max-conns (DURATON_PG_MAX_CONNS) must be between 2 and 1000, got %d", f.PGMaxConns)
	}
	if f.Advertise != "" {
		u, err := url.Parse(f.Advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--advertise (DURATON_ADVERTISE) must be an http(s) base URL, got %q", f.Advertise)
		}
	}
	return nil
}

// checkStoreURL refuses a --store value that is not a PostgreSQL URL.
func checkStoreURL(s string) error {
	if !strings.HasPrefix(s, "postgres://") && !strings.HasPrefix(s, "postgresql://") {
		return errors.New("--store (DURATON_STORE) must be a postgres:// URL, or empty for bbolt in --data")
	}
	return nil
}

// errSelfFenced ends a leader that can no longer prove it holds the lease.
var errSelfFenced = errors.New("leader lease lost or not renewed in time: stopping so that another replica can take over")

func runReplica(ctx context.Context, f serverFlags, stdout io.Writer, log *slog.Logger) error {
	eng, err := pg.Open(ctx, pg.Config{URL: f.Store, MaxConns: f.PGMaxConns, Shards: f.Shards})
	if err != nil {
		return err
	}
	defer eng.Close()
	if eng.ShardCount() != f.Shards {
		log.Info("the database keeps the shard count it was made with", "shards", eng.ShardCount(), "asked", f.Shards)
	}
	id := newReplicaID()
	log = log.With("replica", id)

	self, policy := destinationPolicy(modeServe, f)
	ln, err := listen(f.Addr, self)
	if err != nil {
		return err
	}
	advertise := f.Advertise
	if advertise == "" {
		advertise = "http://" + ln.Addr().String()
	}
	secret, err := eng.ClusterSecret(ctx)
	if err != nil {
		ln.Close()
		return err
	}
	// One registry for the process's life, served by every handler of this replica.
	mtr := metrics.New("")
	shards := newShardSet(eng, id, advertise, f, policy, secret, mtr, stdout, log)
	onForward := mtr.Replica(func() bool { return len(shards.led()) > 0 },
		replica.ResultOK, replica.ResultBadGateway, replica.ResultNoLeader)
	mtr.Shards(func() int { return len(shards.led()) })
	route := newRouter(eng, log)
	fwd, err := replica.New(replica.Config{
		Metrics:   mtr.Handler(f.MetricsToken),
		OnForward: onForward,
		Secret:    secret,
		Shard:     route.shard,
		Local:     shards.local,
		Self:      id,
		// The leader's limits: a batch, an app or events up to 16 MiB, a workflow message up
		// to --max-workflow-body-bytes, any other body up to --max-body-bytes (and no more
		// without a valid token); all bodies held at once up to --follower-buffer-bytes.
		MaxBodyBytes:            max(f.MaxBodyBytes, f.MaxWorkflowBodyBytes, 16<<20),
		MaxMessageBytes:         f.MaxBodyBytes,
		MaxWorkflowMessageBytes: f.MaxWorkflowBodyBytes,
		MaxBufferedBytes:        f.FollowerBufferBytes,
		Authorized:              route.authorized,
		Leader: func(ctx context.Context, shard int) (string, error) {
			s, err := eng.Shard(shard)
			if err != nil {
				return "", err
			}
			l, err := s.Leader(ctx)
			if err != nil || !l.Live || l.Holder == id {
				return "", err
			}
			return l.Addr, nil
		},
		Logger: log,
	})
	if err != nil {
		ln.Close()
		return err
	}
	// The leader's header limit and timeouts, whichever handler serves.
	httpSrv := server.HTTPServer(server.Config{Logger: log}, fwd)
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on http://%s (replica %s, %d shards)\n", ln.Addr(), id, eng.ShardCount())
	log.Info("duraton replica listening", "url", "http://"+ln.Addr().String(), "advertise", advertise, "shards", eng.ShardCount())

	// The runners outlive ctx: at shutdown they hand their shards over first.
	runCtx, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuns()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	changed := eng.WatchLease(watchCtx, log) // a shard resigned, a replica joined or left
	tick := time.NewTicker(f.LeaseTTL / 5)
	defer tick.Stop()
	for {
		shards.balance(ctx, runCtx)
		select {
		case <-ctx.Done():
			log.Info("shutting down; handing the shards over")
			shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			if err := httpSrv.Shutdown(shutCtx); err != nil {
				log.Warn("http shutdown", "err", err)
			}
			cancel()
			shards.releaseAll()
			if err := eng.Leave(context.WithoutCancel(ctx), id); err != nil {
				log.Warn("leave the replicas", "err", err)
			}
			return nil
		case err := <-serveErr:
			return err
		case err := <-shards.fatal:
			httpSrv.Close()
			return err
		case <-tick.C:
		case <-changed:
		}
	}
}

// keepOpen is an engine whose Close leaves it open (runReplica closes it).
type keepOpen struct{ kv.Engine }

func (keepOpen) Close() error { return nil }

func newReplicaID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return "r-" + hex.EncodeToString(b)
}

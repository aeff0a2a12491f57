package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/server/metrics"
	"github.com/duraton/duraton/server/replica"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/kv"
	"github.com/duraton/duraton/storage/pg"
)

// Replicas on PostgreSQL. Every replica serves the whole API. One of them, the holder
// of the leader lease (storage/pg lease.go), runs the delivery engine over the shared
// database; the others forward each request to it (server/replica) and try to take the
// lease whenever it is free. So every limit is enforced by one scheduler and is exact
// across replicas, and the lease's epoch fences the leader's writes: a replica that
// lost the lease cannot write after another took over.
//
// Liveness: the leader renews the lease every TTL/5. It fences itself (exits, cancelling
// its deliveries) when no renewal has succeeded for TTL - TTL/5 by its monotonic clock,
// while a follower takes over only once the lease has been expired for the grace period
// by the database's clock. A follower that takes over starts the engine as at any
// start-up: deliveries the dead leader had in flight go back to their waitlists with
// their slots given back, and are sent again without spending a retry.

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
	eng, err := pg.Open(ctx, pg.Config{URL: f.Store, MaxConns: f.PGMaxConns})
	if err != nil {
		return err
	}
	defer eng.Close()
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
	var local atomic.Pointer[http.Handler] // the node's API handler once this replica leads
	// One registry for the process's life: a follower serves it itself, and the node
	// adds the engine's metrics to it once this replica leads.
	mtr := metrics.New("")
	onForward := mtr.Replica(func() bool { return local.Load() != nil },
		replica.ResultOK, replica.ResultBadGateway, replica.ResultNoLeader)
	fwd, err := replica.New(replica.Config{
		Metrics:   mtr.Handler(f.MetricsToken),
		OnForward: onForward,
		Secret:    secret,
		Local: func() http.Handler {
			if h := local.Load(); h != nil {
				return *h
			}
			return nil
		},
		Self: id,
		// The leader's limits: a batch, an app or events up to 16 MiB, a workflow message up
		// to --max-workflow-body-bytes, any other body up to --max-body-bytes (and no more
		// without a valid token); all bodies held at once up to --follower-buffer-bytes.
		MaxBodyBytes:            max(f.MaxBodyBytes, f.MaxWorkflowBodyBytes, 16<<20),
		MaxMessageBytes:         f.MaxBodyBytes,
		MaxWorkflowMessageBytes: f.MaxWorkflowBodyBytes,
		MaxBufferedBytes:        f.FollowerBufferBytes,
		Authorized:              newFollowerTokens(eng, log).authorized,
		Leader: func(ctx context.Context) (string, error) {
			l, err := eng.Leader(ctx)
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
	var handler atomic.Pointer[http.Handler]
	var h http.Handler = fwd
	handler.Store(&h)
	// The leader's header limit and timeouts, whichever handler it serves.
	httpSrv := server.HTTPServer(server.Config{Logger: log},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on http://%s (replica %s)\n", ln.Addr(), id)
	log.Info("duraton replica listening, following", "url", "http://"+ln.Addr().String(), "advertise", advertise)

	shutdownHTTP := func() {
		shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if err := httpSrv.Shutdown(shutCtx); err != nil {
			log.Warn("http shutdown", "err", err)
		}
	}

	// Follow until the lease is free: poll, and try at once when a leader resigns.
	renewEvery := f.LeaseTTL / 5
	tick := time.NewTicker(renewEvery)
	defer tick.Stop()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	resigned := eng.WatchLease(watchCtx, log)
	var epoch int64
	var leaseFrom time.Time // when the last successful take or renewal was sent (monotonic)
	for epoch == 0 {
		sent := time.Now()
		epoch, err = eng.TryLead(ctx, id, advertise, f.LeaseTTL, f.LeaseGrace)
		if err != nil {
			log.Warn("try to take the leader lease", "err", err)
		}
		if epoch != 0 {
			leaseFrom = sent
			break
		}
		select {
		case <-ctx.Done():
			shutdownHTTP()
			return nil
		case err := <-serveErr:
			return err
		case <-tick.C:
		case <-resigned:
		}
	}
	stopWatch()
	eng.Fence(id, epoch)
	log.Info("took the leader lease", "epoch", epoch)

	n, store, err := lead(ctx, eng, f, policy, secret, mtr, stdout, log)
	if err != nil {
		httpSrv.Close()
		if ctx.Err() != nil {
			// Asked to stop while taking over (a leader resigning at shutdown hands the
			// lease to a replica that is stopping too): a clean stop, not a failure.
			log.Info("shutting down while taking over; resigning the leader lease", "err", err)
			if err := eng.Resign(context.WithoutCancel(ctx), id, epoch); err != nil {
				log.Warn("resign the leader lease", "err", err)
			}
			return nil
		}
		return err
	}
	var nh http.Handler = n.srv.Handler()
	local.Store(&nh)
	handler.Store(&nh)
	fmt.Fprintf(stdout, "leading (epoch %d)\n", epoch)

	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down; resigning the leader lease")
			shutdownHTTP()
			n.stop()
			if err := store.Close(); err != nil { // waits for queued writes
				log.Warn("close the store", "err", err)
			}
			if err := eng.Resign(context.WithoutCancel(ctx), id, epoch); err != nil {
				log.Warn("resign the leader lease", "err", err)
			}
			return nil
		case err := <-serveErr:
			n.stop()
			return err
		case <-tick.C:
			sent := time.Now()
			err := eng.Renew(ctx, id, epoch, f.LeaseTTL)
			switch {
			case err == nil:
				leaseFrom = sent
			case errors.Is(err, pg.ErrLeaseLost) || time.Since(leaseFrom) > f.LeaseTTL-renewEvery:
				// No draining: another replica may be sending these deliveries already.
				log.Error("leader lease lost", "epoch", epoch, "err", err, "since_renewal", time.Since(leaseFrom).String())
				httpSrv.Close()
				return errSelfFenced
			default:
				log.Warn("renew the leader lease", "err", err)
			}
		}
	}
}

// lead builds and starts the node over the shared database, on the database's clock.
func lead(ctx context.Context, eng *pg.Engine, f serverFlags, policy netguard.Policy, secret string, mtr *metrics.Metrics, stdout io.Writer, log *slog.Logger) (*node, *storage.Store, error) {
	offset, err := eng.ClockOffset(ctx)
	if err != nil {
		return nil, nil, err
	}
	log.Info("database clock", "offset", offset.String())
	now := func() time.Time { return time.Now().Add(offset) }
	// The store does not close the engine: the lease is resigned after the store's last
	// write, on the same pool.
	store, err := storage.OpenEngine(keepOpen{eng}, storage.Options{OnCommit: mtr.OnCommit})
	if err != nil {
		return nil, nil, err
	}
	if err := claimDataDir(modeServe, "(the PostgreSQL database)", false, store, stdout); err != nil {
		return nil, nil, err
	}
	n, err := newNode(ctx, nodeDeps{m: modeServe, f: f, store: store, policy: policy, mtr: mtr, log: log, now: now, stdout: stdout, forwardSecret: secret})
	if err != nil {
		return nil, nil, err
	}
	if err := n.start(ctx); err != nil {
		return nil, nil, err
	}
	return n, store, nil
}

// keepOpen is an engine whose Close leaves it open (runReplica closes it).
type keepOpen struct{ kv.Engine }

func (keepOpen) Close() error { return nil }

func newReplicaID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return "r-" + hex.EncodeToString(b)
}

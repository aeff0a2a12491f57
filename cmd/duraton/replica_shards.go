package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/server/metrics"
	"github.com/duraton/duraton/storage"
	"github.com/duraton/duraton/storage/pg"
)

// shardSet is the shards this replica leads, and the loop that shares the shards out
// among the live replicas (balance). Each led shard has a runner (shardRun): it holds
// the shard's lease, renews it, and runs the shard's node (engine, scheduler, sweeps,
// API) until the shard is handed over, the process stops, or the lease is lost.
//
// Sharing out: every replica renews its membership row (pg.Heartbeat); each computes
// its quota from the live members (pg.Quota: an even share, the first replicas in id
// order taking one more), gives up the shards it leads beyond it, and takes free ones
// (resigned, or expired for the grace) up to it. A replica that joins makes the others'
// quotas shrink: they hand shards over, cleanly; one that dies stops renewing, and its
// shards are taken once their leases expire.
type shardSet struct {
	eng       *pg.Engine
	self      string
	advertise string
	f         serverFlags
	policy    netguard.Policy
	secret    string
	mtr       *metrics.Metrics
	stdout    io.Writer
	log       *slog.Logger

	fatal chan error // a runner that lost its lease: the process must stop

	mu   sync.Mutex
	runs map[int]*shardRun
}

// shardRun is one led shard.
type shardRun struct {
	shard    int
	eng      *pg.Engine
	epoch    int64
	takenAt  time.Time                    // when the take was sent (monotonic)
	handler  atomic.Pointer[http.Handler] // the node's API, while it serves
	release  chan struct{}                // closed: hand the shard over
	released bool                         // release is closed (under shardSet.mu)
	done     chan struct{}                // closed once resigned (or given up)
}

func newShardSet(eng *pg.Engine, self, advertise string, f serverFlags, policy netguard.Policy, secret string,
	mtr *metrics.Metrics, stdout io.Writer, log *slog.Logger) *shardSet {
	return &shardSet{eng: eng, self: self, advertise: advertise, f: f, policy: policy, secret: secret, mtr: mtr,
		stdout: stdout, log: log, fatal: make(chan error, 1), runs: map[int]*shardRun{}}
}

// local is the API handler of shard while this replica serves it, else nil.
func (s *shardSet) local(shard int) http.Handler {
	s.mu.Lock()
	r := s.runs[shard]
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	if h := r.handler.Load(); h != nil {
		return *h
	}
	return nil
}

// led is the shards whose node serves now.
func (s *shardSet) led() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for i, r := range s.runs {
		if r.handler.Load() != nil {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// balance is one round of sharing out (see shardSet). runCtx is the runners' context.
func (s *shardSet) balance(ctx, runCtx context.Context) {
	if err := s.eng.Heartbeat(ctx, s.self, s.advertise, s.f.LeaseTTL); err != nil {
		s.log.Warn("replica heartbeat", "err", err)
		return
	}
	members, err := s.eng.Replicas(ctx)
	if err != nil {
		s.log.Warn("read the replicas", "err", err)
		return
	}
	leases, err := s.eng.Leases(ctx)
	if err != nil {
		s.log.Warn("read the shard leases", "err", err)
		return
	}
	var live []string
	for _, m := range members {
		if m.Live || m.ID == s.self {
			live = append(live, m.ID)
		}
	}
	held := map[string]int{}
	for _, l := range leases {
		if l.Live && l.Holder != "" {
			held[l.Holder]++
		}
	}
	n := s.eng.ShardCount()
	quota := pg.Quota(n, live, held, s.self)

	s.mu.Lock()
	var mine []int
	for i, r := range s.runs {
		if !r.released {
			mine = append(mine, i)
		}
	}
	slices.Sort(mine)
	for len(mine) > quota { // the highest-numbered go first
		r := s.runs[mine[len(mine)-1]]
		r.released = true
		close(r.release)
		mine = mine[:len(mine)-1]
		s.log.Info("handing a shard over", "shard", r.shard, "quota", quota, "replicas", len(live))
	}
	mineNow := len(mine)
	taking := make(map[int]bool, len(s.runs))
	for i := range s.runs {
		taking[i] = true
	}
	s.mu.Unlock()
	if mineNow >= quota {
		return
	}
	// Free shards, starting at this replica's place in the ring so that replicas
	// starting together try different ones first.
	start := slices.Index(slices.Sorted(slices.Values(live)), s.self) * n / max(len(live), 1)
	for k := range n {
		if mineNow >= quota || ctx.Err() != nil {
			return
		}
		l := leases[(start+k)%n]
		if taking[l.Shard] || (l.Holder != "" && l.Live) {
			continue
		}
		if s.take(ctx, runCtx, l.Shard) {
			mineNow++
		}
	}
}

// take tries to take shard's lease and, having it, starts its runner.
func (s *shardSet) take(ctx, runCtx context.Context, shard int) bool {
	eng, err := s.eng.Shard(shard)
	if err != nil {
		s.log.Error("take a shard", "shard", shard, "err", err)
		return false
	}
	sent := time.Now()
	epoch, err := eng.TryLead(ctx, s.self, s.advertise, s.f.LeaseTTL, s.f.LeaseGrace)
	if err != nil {
		s.log.Warn("try to take a shard's lease", "shard", shard, "err", err)
		return false
	}
	if epoch == 0 {
		return false // another replica was faster, or it is in its grace
	}
	r := &shardRun{shard: shard, eng: eng, epoch: epoch, takenAt: sent, release: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.runs[shard] = r
	s.mu.Unlock()
	go s.run(runCtx, r)
	return true
}

// run leads one shard until it is handed over (its release is closed) or its lease is
// lost. The lease is renewed from the take on: also while the shard's engine starts,
// which on a large shard may take longer than the lease.
func (s *shardSet) run(ctx context.Context, r *shardRun) {
	log := s.log.With("shard", r.shard, "epoch", r.epoch)
	defer func() {
		s.mu.Lock()
		if s.runs[r.shard] == r {
			delete(s.runs, r.shard)
		}
		s.mu.Unlock()
		close(r.done)
	}()
	resign := func() {
		if err := r.eng.Resign(context.WithoutCancel(ctx), s.self, r.epoch); err != nil {
			log.Warn("resign a shard's lease", "err", err)
		}
	}
	r.eng.Fence(s.self, r.epoch)
	type started struct {
		n     *node
		store *storage.Store
		err   error
	}
	starting := make(chan started, 1)
	go func() {
		n, store, err := s.lead(ctx, r)
		starting <- started{n, store, err}
	}()

	renewEvery := s.f.LeaseTTL / 5
	tick := time.NewTicker(renewEvery)
	defer tick.Stop()
	leaseFrom := r.takenAt
	var n *node
	var store *storage.Store
	var stopped chan struct{} // closed once a hand-over's node has stopped
	release := r.release
	for {
		select {
		case st := <-starting:
			starting = nil
			if st.err != nil {
				log.Error("start a shard's engine; giving the shard up", "err", st.err)
				resign()
				return
			}
			n, store = st.n, st.store
			if release == nil { // handed over while it started
				stopped = s.stopShard(n, store, log)
				continue
			}
			h := n.srv.Handler()
			r.handler.Store(&h)
			fmt.Fprintf(s.stdout, "leading shard %d (epoch %d)\n", r.shard, r.epoch)
			log.Info("leading a shard")
		case <-release:
			// No new request is served here: they wait for the next leader (the
			// forwarder) while in-flight deliveries drain; the lease is renewed meanwhile.
			release = nil
			r.handler.Store(nil)
			if n != nil {
				stopped = s.stopShard(n, store, log)
			}
		case <-stopped:
			resign()
			fmt.Fprintf(s.stdout, "handed shard %d over\n", r.shard)
			log.Info("handed a shard over")
			return
		case <-tick.C:
			sent := time.Now()
			err := r.eng.Renew(ctx, s.self, r.epoch, s.f.LeaseTTL)
			switch {
			case err == nil:
				leaseFrom = sent
			case errors.Is(err, pg.ErrLeaseLost) || time.Since(leaseFrom) > s.f.LeaseTTL-renewEvery:
				// No draining: another replica may be sending these deliveries already.
				log.Error("shard lease lost", "err", err, "since_renewal", time.Since(leaseFrom).String())
				r.handler.Store(nil)
				select {
				case s.fatal <- errSelfFenced:
				default:
				}
				return
			default:
				log.Warn("renew a shard's lease", "err", err)
			}
		}
	}
}

// stopShard stops a shard's node (draining its in-flight deliveries) and closes its
// store, in the background; the channel is closed when both are done.
func (s *shardSet) stopShard(n *node, store *storage.Store, log *slog.Logger) chan struct{} {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		n.stop()
		if err := store.Close(); err != nil { // waits for queued writes
			log.Warn("close a shard's store", "err", err)
		}
	}()
	return stopped
}

// lead builds and starts the shard's node, on the database's clock.
func (s *shardSet) lead(ctx context.Context, r *shardRun) (*node, *storage.Store, error) {
	offset, err := r.eng.ClockOffset(ctx)
	if err != nil {
		return nil, nil, err
	}
	now := func() time.Time { return time.Now().Add(offset) }
	// The store does not close the engine: the lease is resigned after the store's last
	// write, on the same pool.
	store, err := storage.OpenEngine(keepOpen{r.eng}, storage.Options{OnCommit: s.mtr.OnCommit})
	if err != nil {
		return nil, nil, err
	}
	if err := claimDataDir(modeServe, "(the PostgreSQL database)", false, store, io.Discard); err != nil {
		return nil, nil, err
	}
	n, err := newNode(ctx, nodeDeps{m: modeServe, f: s.f, store: store, policy: s.policy, mtr: s.mtr,
		observer: s.mtr.ForShard(r.shard), log: s.log.With("shard", r.shard), now: now, stdout: s.stdout,
		forwardSecret: s.secret, noDefault: pg.ShardOf(devProject, s.eng.ShardCount()) != r.shard})
	if err != nil {
		_ = store.Close()
		return nil, nil, err
	}
	if err := n.start(ctx); err != nil {
		_ = store.Close()
		return nil, nil, err
	}
	return n, store, nil
}

// releaseAll hands every led shard over and waits until each is resigned.
func (s *shardSet) releaseAll() {
	s.mu.Lock()
	var runs []*shardRun
	for _, r := range s.runs {
		if !r.released {
			r.released = true
			close(r.release)
		}
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		<-r.done
	}
}

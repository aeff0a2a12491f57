package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A shard's lease: its row of duraton_shards says which replica runs the shard's
// delivery engine and until when, by the database's clock. A takeover bumps epoch, the fencing token;
// every write of the leader checks it (Engine.Update), under a share lock that makes a
// takeover wait for the writes in progress. Times are the database's (clock_timestamp()),
// so replicas' clocks never decide who leads; a replica only measures, with its monotonic
// clock, how long ago its last renewal succeeded (self-fencing: see Lease in
// cmd/duraton).

// Leader is the lease as stored.
type Leader struct {
	Holder string
	Addr   string // the leader's base URL, where other replicas forward requests
	Epoch  int64
	// Live: the lease has not expired by the database's clock.
	Live bool
}

// Leader reads the lease of this engine's shard.
func (e *Engine) Leader(ctx context.Context) (Leader, error) {
	var l Leader
	err := e.pool.QueryRow(ctx, `SELECT holder, addr, epoch, lease_until > clock_timestamp() FROM duraton_shards WHERE shard = $1`, e.shard).
		Scan(&l.Holder, &l.Addr, &l.Epoch, &l.Live)
	if errors.Is(err, pgx.ErrNoRows) {
		return Leader{}, errNoShards
	}
	if err != nil {
		return Leader{}, fmt.Errorf("pg: read lease: %w", err)
	}
	return l, nil
}

// TryLead takes the lease for holder if it is free: never held, resigned, or expired for
// longer than grace (the grace covers a leader whose renewal is late but that has not
// yet fenced itself). It returns the new epoch, or 0 when another replica leads.
func (e *Engine) TryLead(ctx context.Context, holder, addr string, ttl, grace time.Duration) (int64, error) {
	var epoch int64
	sent := e.clock()
	err := e.pool.QueryRow(ctx, `UPDATE duraton_shards
		SET holder = $1, addr = $2, epoch = epoch + 1, lease_until = clock_timestamp() + $3::interval
		WHERE shard = $5 AND (holder = '' OR lease_until < clock_timestamp() - $4::interval)
		RETURNING epoch`, holder, addr, ttl, grace, e.shard).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pg: take lease: %w", err)
	}
	e.leaseUntil.Store(sent + int64(ttl))
	return epoch, nil
}

// ErrLeaseLost is returned by Renew when another replica took the lease over.
var ErrLeaseLost = errors.New("pg: the shard's lease was taken over by another replica")

// Renew extends holder's lease by ttl from now (database time). It fails with
// ErrLeaseLost once another replica took over.
func (e *Engine) Renew(ctx context.Context, holder string, epoch int64, ttl time.Duration) error {
	sent := e.clock()
	tag, err := e.pool.Exec(ctx, `UPDATE duraton_shards SET lease_until = clock_timestamp() + $3::interval
		WHERE shard = $4 AND holder = $1 AND epoch = $2`, holder, epoch, ttl, e.shard)
	if err != nil {
		return fmt.Errorf("pg: renew lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		e.dropCache()
		return ErrLeaseLost
	}
	e.leaseUntil.Store(sent + int64(ttl))
	return nil
}

// Resign gives the lease up at once (a clean shutdown), so a follower takes over without
// waiting for it to expire. It notifies leaseChannel (see WatchLease), so followers try
// at once rather than at their next poll.
func (e *Engine) Resign(ctx context.Context, holder string, epoch int64) error {
	e.dropCache()
	_, err := e.pool.Exec(ctx, `WITH resigned AS (
			UPDATE duraton_shards SET lease_until = '-infinity', holder = ''
			WHERE shard = $3 AND holder = $1 AND epoch = $2 RETURNING 1)
		SELECT pg_notify('`+leaseChannel+`', '') FROM resigned`, holder, epoch, e.shard)
	if err != nil {
		return fmt.Errorf("pg: resign lease: %w", err)
	}
	return nil
}

// Fence makes every later Update check that holder still holds the lease at epoch: from
// here on this process writes as the leader.
func (e *Engine) Fence(holder string, epoch int64) {
	e.fence.Store(&fence{holder: holder, epoch: epoch})
	// The shards share Config.CacheBytes (4 MiB each at least).
	e.cache.CompareAndSwap(nil, newValueCache(max(e.cfg.CacheBytes/int64(len(e.shards)), 4<<20), e.clock))
}

// ClockOffset is how far the database's clock is ahead of this process's: the midpoint
// of the shortest of a few round trips, as NTP does. The leader runs its engine on
// time.Now()+offset, so rate windows and GCRA times it stores mean the same to the next
// leader. One round trip was not enough: the first one of a pool also opens its
// connection, which made the database's clock read milliseconds ahead (+7.7 ms in a
// clean-clone CI run, where a sleepUntil then woke 6 ms early by the endpoint's clock).
func (e *Engine) ClockOffset(ctx context.Context) (time.Duration, error) {
	const samples = 5
	var best, bestRTT time.Duration
	for i := range samples + 1 {
		before := time.Now()
		var db time.Time
		if err := e.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
			return 0, fmt.Errorf("pg: read clock: %w", err)
		}
		after := time.Now()
		rtt := after.Sub(before)
		if i == 0 {
			continue // a warm-up: it may open the connection
		}
		if i == 1 || rtt < bestRTT {
			best, bestRTT = db.Sub(before.Add(rtt/2)), rtt
		}
	}
	return best, nil
}

// ClusterSecret is the secret the replicas of this database share (made by the
// migrations): followers send it with forwarded requests, and the leader trusts the
// client address they pass on only with it.
func (e *Engine) ClusterSecret(ctx context.Context) (string, error) {
	var s string
	if err := e.pool.QueryRow(ctx, `SELECT secret FROM duraton_cluster WHERE id = 1`).Scan(&s); err != nil {
		return "", fmt.Errorf("pg: read cluster secret: %w", err)
	}
	return s, nil
}

package pg

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Shards. A database is divided into a fixed number of shards, set by the first replica
// that opens it (Config.Shards). Each shard is a whole store of its own — its root
// buckets live under one bucket of duraton_buckets, shard 0's at the database's root —
// with a lease of its own (lease.go): the replica that holds it runs that shard's
// delivery engine, and every write of the shard is fenced by its epoch. A project
// belongs to one shard (ShardOf), so every limit of a project stays in one scheduler.
//
// A database that holds data from before shards is shard 0 of one: its buckets are
// already the root's.

// MaxShards bounds Config.Shards.
const MaxShards = 1024

// ShardOf is the shard of a project among n: FNV-1a of its id, modulo n. It must never
// change: a project's records live in its shard.
func ShardOf(project string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(project)) // a hash.Hash never fails a Write
	return int(h.Sum32() % uint32(n))
}

// ShardCount is the number of shards of the database.
func (e *Engine) ShardCount() int { return len(e.shards) }

// ShardID is this engine's shard.
func (e *Engine) ShardID() int { return e.shard }

// Shard returns the engine of shard i, on the same pool (its Close does nothing).
func (e *Engine) Shard(i int) (*Engine, error) {
	if i < 0 || i >= len(e.shards) {
		return nil, fmt.Errorf("pg: no shard %d (the database has %d)", i, len(e.shards))
	}
	return e.shards[i], nil
}

// ForProject returns the engine of project's shard.
func (e *Engine) ForProject(project string) *Engine {
	return e.shards[ShardOf(project, len(e.shards))]
}

// setupShards returns the root bucket of each shard, making the shards (want of them, or
// one when the database holds data already) if no replica has yet. It runs under the
// migration lock, so replicas starting at once agree.
func setupShards(ctx context.Context, pool *pgxpool.Pool, want int) ([]int64, error) {
	var roots []int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		roots = roots[:0]
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return fmt.Errorf("pg: shard setup lock: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT shard, root FROM duraton_shards ORDER BY shard`)
		if err != nil {
			return fmt.Errorf("pg: read shards: %w", err)
		}
		for rows.Next() {
			var shard int
			var root int64
			if err := rows.Scan(&shard, &root); err != nil {
				return fmt.Errorf("pg: read shards: %w", err)
			}
			if shard != len(roots) {
				return fmt.Errorf("pg: duraton_shards lacks shard %d (has %d): the table was changed by hand", len(roots), shard)
			}
			roots = append(roots, root)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("pg: read shards: %w", err)
		}
		if len(roots) > 0 {
			return nil
		}
		var used bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM duraton_buckets)`).Scan(&used); err != nil {
			return fmt.Errorf("pg: shard setup: %w", err)
		}
		n := want
		if used {
			n = 1 // made before shards: its buckets are the root's, shard 0's
		}
		roots = append(roots, 0)
		for i := 1; i < n; i++ {
			var root int64
			if err := tx.QueryRow(ctx, `INSERT INTO duraton_buckets (parent, name) VALUES (0, $1) RETURNING id`,
				[]byte("\x00shard-"+strconv.Itoa(i))).Scan(&root); err != nil {
				return fmt.Errorf("pg: make shard %d: %w", i, err)
			}
			roots = append(roots, root)
		}
		for i, root := range roots {
			if _, err := tx.Exec(ctx, `INSERT INTO duraton_shards (shard, root) VALUES ($1, $2)`, i, root); err != nil {
				return fmt.Errorf("pg: make shard %d: %w", i, err)
			}
		}
		return nil
	})
	return roots, err
}

// ShardLease is one shard's lease as stored.
type ShardLease struct {
	Shard  int
	Holder string // "" when resigned or never held
	Addr   string
	Epoch  int64
	Live   bool // not expired by the database's clock
}

// Leases reads the lease of every shard, in shard order.
func (e *Engine) Leases(ctx context.Context) ([]ShardLease, error) {
	rows, err := e.pool.Query(ctx, `SELECT shard, holder, addr, epoch, lease_until > clock_timestamp() FROM duraton_shards ORDER BY shard`)
	if err != nil {
		return nil, fmt.Errorf("pg: read leases: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ShardLease, error) {
		var l ShardLease
		err := r.Scan(&l.Shard, &l.Holder, &l.Addr, &l.Epoch, &l.Live)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("pg: read leases: %w", err)
	}
	return out, nil
}

// Replica is a replica's membership row.
type Replica struct {
	ID   string
	Addr string
	Live bool // its last heartbeat has not expired by the database's clock
}

// Heartbeat records that replica id (serving at addr) is alive for ttl more. A replica
// that was not a member yet notifies the others (leaseChannel), so they share the
// shards out again at once. Rows dead for ten minutes are removed on the way.
func (e *Engine) Heartbeat(ctx context.Context, id, addr string, ttl time.Duration) error {
	_, err := e.pool.Exec(ctx, `WITH up AS (
			INSERT INTO duraton_replicas (id, addr, seen_until) VALUES ($1, $2, clock_timestamp() + $3::interval)
			ON CONFLICT (id) DO UPDATE SET addr = $2, seen_until = clock_timestamp() + $3::interval
			RETURNING (xmax = 0) AS joined),
		gone AS (DELETE FROM duraton_replicas WHERE id <> $1 AND seen_until < clock_timestamp() - interval '10 minutes')
		SELECT pg_notify('`+leaseChannel+`', '') FROM up WHERE joined`, id, addr, ttl)
	if err != nil {
		return fmt.Errorf("pg: heartbeat: %w", err)
	}
	return nil
}

// Leave removes replica id's membership (a clean shutdown, after it resigned its
// shards) and notifies the others.
func (e *Engine) Leave(ctx context.Context, id string) error {
	_, err := e.pool.Exec(ctx, `WITH gone AS (DELETE FROM duraton_replicas WHERE id = $1 RETURNING 1)
		SELECT pg_notify('`+leaseChannel+`', '') FROM gone`, id)
	if err != nil {
		return fmt.Errorf("pg: leave: %w", err)
	}
	return nil
}

// Replicas lists the membership rows, ordered by id.
func (e *Engine) Replicas(ctx context.Context) ([]Replica, error) {
	rows, err := e.pool.Query(ctx, `SELECT id, addr, seen_until > clock_timestamp() FROM duraton_replicas ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("pg: read replicas: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Replica, error) {
		var x Replica
		err := r.Scan(&x.ID, &x.Addr, &x.Live)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("pg: read replicas: %w", err)
	}
	return out, nil
}

// Quota is how many of n shards the replica self leads when the replicas live are alive
// and held says how many shards each leads now: n divided evenly, the remainder going
// to the replicas that lead the most already (then by id), so that a shard moves only
// when the shares must change. Zero when self is not among live.
func Quota(n int, live []string, held map[string]int, self string) int {
	ranked := slices.Clone(live)
	slices.SortFunc(ranked, func(a, b string) int {
		if d := held[b] - held[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	i := slices.Index(ranked, self)
	if i < 0 {
		return 0
	}
	q := n / len(ranked)
	if i < n%len(ranked) {
		q++
	}
	return q
}

// errNoShards guards the lease statements of an engine whose row is missing.
var errNoShards = errors.New("pg: the shard's lease row is missing")

package pg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/duraton/duraton/storage/kv"
)

// Config configures the engine. URL is required; zero fields take the defaults.
type Config struct {
	// URL is a postgres:// connection string (libpq's keywords work too).
	URL string
	// MaxConns caps the connection pool. Default 16: the group committer uses one at a
	// time, the rest serve reads and the lease.
	MaxConns int
	// StatementTimeout bounds every statement, so a stuck database fails writes instead
	// of hanging the committer. Default 30s.
	StatementTimeout time.Duration
	// CacheBytes bounds the leader's cache of committed values (cache.go). Default
	// 64 MiB.
	CacheBytes int64
	// ViewCacheAge is how long after the leader cached a value its Views may read it
	// from the cache (view.go): the bound on how stale a View can read a record that a
	// writer outside the fence (`duraton tokens`) changed. Default 1s.
	ViewCacheAge time.Duration
	// Shards is the number of shards a database made by this Open gets (shards.go);
	// an existing database keeps the count it was made with (Engine.ShardCount). A
	// database that already holds data from before shards gets 1. Default 1, at most
	// MaxShards.
	Shards int

	tracer pgx.QueryTracer // tests count the statements sent
}

func (c Config) withDefaults() Config {
	if c.MaxConns <= 0 {
		c.MaxConns = 16
	}
	if c.StatementTimeout <= 0 {
		c.StatementTimeout = 30 * time.Second
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = 64 << 20
	}
	if c.ViewCacheAge <= 0 {
		c.ViewCacheAge = time.Second
	}
	if c.Shards <= 0 {
		c.Shards = 1
	}
	return c
}

// Validate reports the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("pg: URL is required")
	case c.MaxConns < 0:
		return errors.New("pg: MaxConns must not be negative")
	case c.StatementTimeout < 0:
		return errors.New("pg: StatementTimeout must not be negative")
	case c.CacheBytes < 0:
		return errors.New("pg: CacheBytes must not be negative")
	case c.ViewCacheAge < 0:
		return errors.New("pg: ViewCacheAge must not be negative")
	case c.Shards < 0 || c.Shards > MaxShards:
		return fmt.Errorf("pg: Shards must be between 1 and %d", MaxShards)
	}
	return nil
}

// Engine is kv.Engine on PostgreSQL: one shard's buckets (shards.go). Open returns
// shard 0; Shard returns the others, on the same pool. It is safe for concurrent use.
type Engine struct {
	*conn
	shard int   // this engine's shard
	root  int64 // the bucket its root buckets live under (0: the database's root)

	// writeMu makes Updates one at a time. A write transaction runs at READ COMMITTED
	// with its writes buffered until commit, so two running at once could each read a
	// value and both write it back (a lost update); serial, they cannot, and the value
	// cache stays exact. The Store's committer writes one group at a time anyway, so
	// this costs nothing there. Across processes the same holds because only the
	// lease holder writes (the fence).
	writeMu sync.Mutex

	fence atomic.Pointer[fence]      // set once this process leads: every write is checked
	cache atomic.Pointer[valueCache] // set with fence: this process is the only writer

	// gate: a commit of the leader holds it from COMMIT until the cache has caught up,
	// a View reading the cache holds it shared until its snapshot is set (view.go).
	gate sync.RWMutex
	// leaseUntil: until when (clock) this process surely holds the lease.
	leaseUntil atomic.Int64
	clock      func() int64 // monotonic nanoseconds
}

// conn is what the shards of one Open share.
type conn struct {
	pool *pgxpool.Pool
	cfg  Config

	// ctx bounds every statement; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	buckets sync.Map // bucketKey -> int64: ids of committed buckets (never deleted)
	shards  []*Engine
}

// fence is the lease a write must still hold.
type fence struct {
	holder string
	epoch  int64
}

type bucketKey struct {
	parent int64
	name   string
}

var _ kv.Engine = (*Engine)(nil)

// Open connects, applies the migrations the database lacks and returns the engine.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("pg: connection string: %w", err)
	}
	pc.MaxConns = int32(cfg.MaxConns)
	if cfg.tracer != nil {
		pc.ConnConfig.Tracer = cfg.tracer
	}
	pc.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(cfg.StatementTimeout.Milliseconds())
	// A session that dies with a transaction open must not hold back vacuum.
	pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(cfg.StatementTimeout.Milliseconds())
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pg: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pg: connect: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	roots, err := setupShards(ctx, pool, cfg.Shards)
	if err != nil {
		pool.Close()
		return nil, err
	}
	start := time.Now()
	c := &conn{pool: pool, cfg: cfg}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	clock := func() int64 { return int64(time.Since(start)) }
	for i, root := range roots {
		c.shards = append(c.shards, &Engine{conn: c, shard: i, root: root, clock: clock})
	}
	return c.shards[0], nil
}

// Close cancels what is running and closes the pool, for every shard: call it on the
// engine Open returned (Close of another shard does nothing).
func (e *Engine) Close() error {
	if e.shard != 0 {
		return nil
	}
	e.cancel()
	e.pool.Close()
	return nil
}

// Pool is the connection pool (the lease and tests use it).
func (e *Engine) Pool() *pgxpool.Pool { return e.pool }

// View runs fn in a read-only REPEATABLE READ transaction: one snapshot.
func (e *Engine) View(fn func(kv.Tx) error) error { return e.run(false, fn) }

// Update runs fn in a read-write transaction and commits it (PostgreSQL's commit is
// durable: synchronous_commit must stay on, the default). Updates run one at a time
// (writeMu): one writer per database, which the lease makes true across replicas. When this process leads, the
// transaction first takes a share lock on the lease row and checks the epoch: a takeover
// waits for it, and after a takeover it fails with kv.ErrFenced.
func (e *Engine) Update(fn func(kv.Tx) error) error { return e.run(true, fn) }

func (e *Engine) run(write bool, fn func(kv.Tx) error) error {
	if !write {
		// A read is not run again (its function may not be safe to repeat); the pool's
		// other connections are dropped, as likely dead as this one.
		connLost, err := e.attempt(false, fn)
		if connLost {
			e.pool.Reset()
		}
		return err
	}
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	connLost, err := e.attempt(true, fn)
	if connLost {
		// The connection died before COMMIT was sent, so nothing was committed: most
		// likely the server restarted, and every pooled connection is as dead as this
		// one. Drop them all and run the transaction once more on a new one (a write
		// function may run twice: storage's group commit re-runs a group anyway).
		e.pool.Reset()
		_, err = e.attempt(true, fn)
	}
	return err
}

// attempt runs fn in one transaction. connLost reports a failure of the connection
// before anything was committed: a write that may be run again.
func (e *Engine) attempt(write bool, fn func(kv.Tx) error) (connLost bool, err error) {
	s, err := e.session(e.ctx, write)
	if err != nil {
		return false, err
	}
	committing := false
	defer func() {
		if !committing {
			connLost = err != nil && s.conn.Conn().IsClosed() && e.ctx.Err() == nil
			if rerr := s.end(false); err == nil && rerr != nil {
				err = rerr
			}
		}
	}()
	if write {
		if err := e.checkFence(s); err != nil {
			return false, err
		}
	}
	t := &tx{e: e, ctx: e.ctx, ptx: s, write: write}
	if write {
		t.cache = e.cache.Load()
	} else {
		t.vc = e.viewCache()
		defer t.release()
	}
	ferr := fn(t)
	if t.err != nil {
		return false, t.err // a failed read or write fails the whole transaction
	}
	if ferr != nil {
		return false, ferr
	}
	if !write {
		return false, nil
	}
	if err := t.flushAll(); err != nil {
		return false, err
	}
	committing = true
	if t.cache != nil {
		// No View may set its snapshot while the commit is in flight (view.go).
		e.gate.Lock()
	}
	err = s.end(true)
	if err != nil {
		t.uncache() // it may have committed: what it wrote is read again
	} else {
		t.recache()
	}
	if t.cache != nil {
		e.gate.Unlock()
	}
	if err != nil {
		return false, err
	}
	for k, id := range t.created {
		e.buckets.Store(k, id)
	}
	return false, nil
}

// checkFence fails the transaction unless this process still holds the lease it led
// with (when it leads at all).
func (e *Engine) checkFence(s *session) error {
	f := e.fence.Load()
	if f == nil {
		return nil
	}
	var ok bool
	err := s.QueryRow(`SELECT true FROM duraton_shards WHERE shard = $1 AND holder = $2 AND epoch = $3 FOR SHARE`,
		e.shard, f.holder, f.epoch).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		e.dropCache()
		return kv.ErrFenced
	}
	if err != nil {
		return fmt.Errorf("pg: check lease: %w", err)
	}
	return nil
}

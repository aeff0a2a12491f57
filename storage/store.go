package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/duraton/duraton/storage/internal/boltkv"
	"github.com/duraton/duraton/storage/internal/wal"
	"github.com/duraton/duraton/storage/internal/walkv"
	"github.com/duraton/duraton/storage/kv"
)

// Options configure a Store. The zero value is valid.
type Options struct {
	// LockTimeout bounds the wait for the data file's lock. Default 1s: a second process on
	// the same file gets ErrLocked instead of hanging.
	LockTimeout time.Duration
	// MaxBatch caps how many Update functions share one commit. Default 1024.
	MaxBatch int
	// OnCommit, if set, is told the size and duration of every group commit (metrics).
	// It runs on the goroutine that commits the group (one of its callers) and must be fast.
	OnCommit func(ops int, took time.Duration)
	// CheckpointBytes is how much of the write-ahead log accumulates before what it
	// holds is written into the data file (a checkpoint). The log's overlay in memory and
	// the disk space the log needs beyond the data file are at most about five times
	// this (see storage/internal/walkv). Default 1 MiB.
	CheckpointBytes int64
	// InitialMmapBytes is how much address space the data file is mapped with at first:
	// until the file grows past it no checkpoint remaps the file (see boltkv.Open). Default
	// 256 MiB. (Benchmarks and tests set it small to reach a remap quickly.)
	InitialMmapBytes int

	// walFS is the write-ahead log's filesystem (wal.OS when nil): tests put a faulty one.
	walFS wal.FS
}

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = time.Second
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1024
	}
	if o.CheckpointBytes <= 0 {
		o.CheckpointBytes = 1 << 20
	}
	if o.InitialMmapBytes <= 0 {
		o.InitialMmapBytes = 256 << 20
	}
	return o
}

// Store is the store: the Tx methods over a storage engine (bbolt by default,
// PostgreSQL through storage/pg), with a group committer in front of its writes. It is
// safe for concurrent use.
type Store struct {
	engine kv.Engine
	db     *bolt.DB // the bbolt file, nil on other engines (Backup, Path)
	opts   Options

	stats       commitStats
	viewsClosed atomic.Bool // Close was called (View)

	// The group commit's queue (commit.go).
	qmu     sync.Mutex
	queue   []*op         // waiting functions, oldest first; non-empty only while leading
	leading bool          // a caller is committing a group
	closed  bool          // Close was called: no more functions are queued
	drained chan struct{} // closed when the last group after Close is committed
	batch   []*op         // the leader's group, reused
}

// Open opens (creating if needed) the data file at path. An existing file is validated
// first (boltkv.Open) and refused, untouched, when damaged: the error wraps ErrCorrupt.
// Indexes added since the file was written are built (sweep.go).
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("storage: create data directory: %w", err)
	}
	db, err := boltkv.Open(path, boltkv.Options{LockTimeout: opts.LockTimeout, InitialMmapBytes: opts.InitialMmapBytes})
	if err != nil {
		return nil, err
	}
	e, err := walkv.Open(db, walkv.Config{CheckpointBytes: opts.CheckpointBytes, FS: opts.walFS})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := e.Update(createRoots); err != nil {
		_ = e.Close()
		return nil, fmt.Errorf("storage: initialise %s: %w", path, err)
	}
	if err := migrateSweepIndexes(e); err != nil { // sweep.go
		_ = e.Close()
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	return withSearchIndex(newStore(e, db, opts))
}

// OpenEngine makes a Store over another storage engine (storage/pg). The root buckets
// are created when missing, and indexes added since the data was written are built.
func OpenEngine(e kv.Engine, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := e.Update(createRoots); err != nil {
		return nil, fmt.Errorf("storage: initialise: %w", err)
	}
	if err := migrateSweepIndexes(e); err != nil { // sweep.go
		return nil, err
	}
	return withSearchIndex(newStore(e, nil, opts))
}

// withSearchIndex builds the run search index of a data file from before it (runsearch.go)
// and returns s, or closes s on failure.
func withSearchIndex(s *Store) (*Store, error) {
	if err := s.migrateSearchIndexes(); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func newStore(e kv.Engine, db *bolt.DB, opts Options) *Store {
	return &Store{engine: e, db: db, opts: opts}
}

// createRoots creates the root buckets every transaction expects.
func createRoots(tx kv.Tx) error {
	for _, name := range []string{bucketTokens, bucketDue, bucketProjects} {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return err
		}
	}
	return nil
}

// Close waits for queued writes to commit, then closes the file.
func (s *Store) Close() error {
	if !s.stopCommitter() {
		return nil
	}
	// Views fail from here on, also on an engine that Close leaves open (a shard of a
	// PostgreSQL database: its pool serves the other shards).
	s.viewsClosed.Store(true)
	return s.engine.Close()
}

// Path is the data file's path ("" on an engine other than bbolt).
func (s *Store) Path() string {
	if s.db == nil {
		return ""
	}
	return s.db.Path()
}

// View runs fn in a read-only transaction. Bytes read must be copied (the decoders here
// do) before fn returns.
func (s *Store) View(fn func(*Tx) error) error {
	if s.viewsClosed.Load() {
		return ErrClosed
	}
	return s.engine.View(func(ktx kv.Tx) error { return fn(&Tx{tx: ktx}) })
}

// commitStats counts the group committer's work (read with Stats).
type commitStats struct {
	commits, ops atomic.Int64
	commitNanos  atomic.Int64
}

// Stats reports the group committer's totals: commits made, Update functions committed,
// time spent in commits and, on bbolt, the page writes those commits made (each a
// pwrite of one page or one run of overflow pages; the meta page included): what a
// commit costs grows with the pages it dirties.
//
// On a data file, commits go to the write-ahead log (LogBytes) and bbolt's pages are
// written by checkpoints.
type Stats struct {
	Commits      int64
	Ops          int64
	CommitTime   time.Duration
	PagesWritten int64
	LogBytes     int64 // record bytes appended to the write-ahead log
	Checkpoints  int64 // checkpoints of the log into bbolt
}

// Stats returns the committer's totals so far.
func (s *Store) Stats() Stats {
	st := Stats{Commits: s.stats.commits.Load(), Ops: s.stats.ops.Load(), CommitTime: time.Duration(s.stats.commitNanos.Load())}
	if s.db != nil {
		bs := s.db.Stats()
		st.PagesWritten = bs.TxStats.GetWrite()
	}
	if w, ok := s.engine.(*walkv.Engine); ok {
		st.LogBytes, st.Checkpoints = w.Stats()
	}
	return st
}

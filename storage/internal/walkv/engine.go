package walkv

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/duraton/duraton/storage/internal/wal"
	"github.com/duraton/duraton/storage/kv"
)

// Engine is bbolt behind a write-ahead log: the engine Store uses on a data file.
//
// bbolt alone syncs twice per commit (the pages, then the meta page) and rewrites every
// page it touches, ~40 for a group commit at 64 sessions. Here a commit is one record
// appended to the log and one fdatasync; what it wrote goes to the overlay in memory
// (overlay.go), which reads see above bbolt. When the log's segment reaches
// CheckpointBytes, the overlay is frozen, a new segment begins, and a checkpoint writes
// the frozen overlay into bbolt in one ordinary (synced) bbolt transaction, then deletes
// the old segment. bbolt is therefore always a consistent committed state, and the log
// holds everything committed since; on open, what the log holds is replayed into bbolt.
//
// Commits never wait for a checkpoint, unless the next segment fills up (walBacklog)
// while one is still being checkpointed: backpressure that bounds the overlays' memory.
type Engine struct {
	db    *bolt.DB
	fs    wal.FS
	path  string
	epoch [16]byte
	reg   *bucketRegistry
	limit int64 // CheckpointBytes
	// lastSeg is the highest segment number created, which checkpoints keep in the data
	// file: numbers never repeat (each seeds its records' checksums).
	lastSeg atomic.Uint64

	writeMu sync.Mutex // one Update (or checkpoint request, or Close) at a time
	// Guarded by writeMu:
	seg *wal.Segment
	cur *overlay // the latest committed overlay, which the next Update clones
	// defined are the bucket numbers whose definition is in the segment's log; pending
	// those the record being appended defines, which count only once it is durable.
	defined, pending map[uint32]bool
	payload          []byte
	closed           bool

	mu       sync.Mutex // guards the layering readers start from
	top      *overlay
	frozen   *overlay
	frozenN  uint64 // the frozen overlay's segment
	gen      uint64 // bumped whenever the layering changes
	baseTxID uint64 // bbolt's last transaction (a checkpoint's)
	// The checkpoint in progress (ckptRunning) closes ckptDone when it ends; ckptErr is
	// the last one's failure, which leaves the frozen overlay in place to try again.
	ckptRunning bool
	ckptDone    chan struct{}
	ckptErr     error
	err         error // a failure that stopped the engine (see ErrFailed)

	ckptReq  chan struct{}
	loopDone chan struct{}

	logBytes, checkpoints atomic.Int64 // Stats
}

// ErrFailed wraps the failure that stopped a write-ahead-logged store: after a failed
// log write or checkpoint nothing more is committed (what was acknowledged is in the log,
// and a restart replays it).
var ErrFailed = errors.New("write-ahead log stopped")

func (e *Engine) failed() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// usable is why the engine takes no more writes: closed, or stopped by a failure.
// writeMu is held.
func (e *Engine) usable() error {
	if e.closed {
		return kv.ErrClosed
	}
	return e.failed()
}

func (e *Engine) fail(err error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = fmt.Errorf("storage: %w: %w", ErrFailed, err)
	}
	return e.err
}

// begin starts a transaction on the current layering. The layering and bbolt's snapshot
// must agree: a checkpoint ending between taking the one and beginning the other would
// leave out, or double, what it moved, so begin retries when the generation changed.
func (e *Engine) begin(write bool) (*walTx, error) {
	for {
		e.mu.Lock()
		top, frozen, gen := e.top, e.frozen, e.gen
		e.mu.Unlock()
		base, err := e.db.Begin(false)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		same := e.gen == gen
		e.mu.Unlock()
		if !same {
			_ = base.Rollback()
			continue
		}
		tx := &walTx{e: e, base: base, top: top, frozen: frozen, write: write}
		if write {
			tx.top = top.Clone()
		}
		return tx, nil
	}
}

func (e *Engine) View(fn func(kv.Tx) error) error {
	tx, err := e.begin(false)
	if err != nil {
		return err
	}
	defer tx.base.Rollback()
	return fn(tx)
}

func (e *Engine) Update(fn func(kv.Tx) error) error {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if err := e.usable(); err != nil {
		return err
	}
	if err := e.maybeFreeze(); err != nil {
		return err
	}
	tx, err := e.begin(true)
	if err != nil {
		return err
	}
	err = e.run(tx, fn)
	if err != nil || len(tx.ops) == 0 {
		return err
	}
	clear(e.pending)
	e.payload = e.encode(e.payload[:0], tx.ops)
	if fatal, err := e.seg.Append(e.payload); err != nil {
		err = fmt.Errorf("storage: %w", err)
		if errors.Is(err, wal.ErrTooLarge) {
			err = fmt.Errorf("%w (4 times --checkpoint-bytes, at least 64 MiB, bounds one commit: the memory the log holds)", err)
		}
		if fatal {
			return e.fail(err)
		}
		return err
	}
	for id := range e.pending {
		e.defined[id] = true
	}
	e.logBytes.Add(int64(wal.RecordHead + len(e.payload)))
	if cap(e.payload) > 4<<20 {
		e.payload = nil
	}
	e.cur = tx.top
	e.mu.Lock()
	e.top = tx.top
	e.mu.Unlock()
	return nil
}

// run runs fn in tx and ends tx's bbolt snapshot, however fn ends (a panic, a test's
// FailNow): an open bbolt transaction would block the next checkpoint and Close.
// Nothing in the overlay points into bbolt's pages (Put copies), so the snapshot can
// end before the commit.
func (e *Engine) run(tx *walTx, fn func(kv.Tx) error) error {
	defer tx.base.Rollback()
	return fn(tx)
}

// walBacklog is how many times CheckpointBytes the log may grow to while a checkpoint is
// in progress or failing: slack for a slow checkpoint, and a bound on memory (the
// overlays hold about walBacklog+1 times CheckpointBytes).
const walBacklog = 4

// maybeFreeze starts a checkpoint when the segment is full. While one is in progress,
// commits go on until the segment holds walBacklog times CheckpointBytes, then wait for
// it. A checkpoint that failed (a full disk) is tried again by the next commit; until
// one succeeds, commits fail once the segment holds that much, storing nothing.
func (e *Engine) maybeFreeze() error {
	e.mu.Lock()
	frozen, running, done := e.frozen != nil, e.ckptRunning, e.ckptDone
	if frozen && !running {
		done = e.startCheckpointLocked()
	}
	e.mu.Unlock()
	if e.seg.Written < e.limit || frozen && e.seg.Written < walBacklog*e.limit {
		return nil
	}
	if frozen {
		<-done
		e.mu.Lock()
		frozen, err := e.frozen != nil, e.ckptErr
		e.mu.Unlock()
		if frozen {
			return err
		}
	}
	return e.freeze()
}

// startCheckpointLocked asks the checkpointer to write the frozen overlay into bbolt. mu
// is held.
func (e *Engine) startCheckpointLocked() chan struct{} {
	e.ckptRunning = true
	e.ckptDone = make(chan struct{})
	e.ckptReq <- struct{}{} // never blocks: one request at a time, buffered
	return e.ckptDone
}

// extendBy is the zero-filled space a segment grows by: walExtendBy, or less when a
// segment is checkpointed before it would use that much (a small disk's setting).
func extendBy(limit int64) int64 { return min(walExtendBy, max(limit, 4<<10)) }

// freeze makes the current overlay the frozen one, begins a new segment, and asks the
// checkpointer to write the frozen overlay into bbolt. No checkpoint may be in progress.
func (e *Engine) freeze() error {
	e.mu.Lock()
	after := e.baseTxID + 1 // what bbolt's txid will be once the frozen overlay is in
	e.mu.Unlock()
	next, err := wal.Create(e.fs, e.path, e.seg.N+1, wal.Header{Epoch: e.epoch, BaseTxID: after}, e.segConfig())
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	e.lastSeg.Store(next.N)
	old := e.seg
	e.seg, e.defined = next, map[uint32]bool{}
	e.mu.Lock()
	e.frozen, e.frozenN = e.cur, old.N
	e.cur = newOverlay()
	e.top = e.cur
	e.gen++
	e.startCheckpointLocked()
	e.mu.Unlock()
	// Every record of the old segment was synced when it was written.
	_ = old.Close()
	return nil
}

// segConfig lays out a new segment: extendBy of zeros at a time, and commits bounded
// by MaxCommitBytes.
func (e *Engine) segConfig() wal.Config {
	return wal.Config{ExtendBy: extendBy(e.limit), MaxRecord: int(MaxCommitBytes(e.limit))}
}

// MaxCommitBytes is the largest commit (one group commit's log record) a data file with
// the given CheckpointBytes takes: walBacklog times CheckpointBytes, at least 64 MiB (a
// full /v2/batch of workflow steps, 16 MiB of bodies, stores them twice: messages and
// histories; a 10 MiB workflow body the same). It
// bounds what one commit adds to the log's memory (the overlays hold about walBacklog+1
// times CheckpointBytes, plus at most one such commit each); a larger one fails with
// ErrCommitTooLarge and stores nothing.
func MaxCommitBytes(checkpointBytes int64) int64 {
	return min(max(walBacklog*checkpointBytes, 64<<20), wal.MaxRecord)
}

// ErrCommitTooLarge is a commit over MaxCommitBytes.
var ErrCommitTooLarge = wal.ErrTooLarge

// checkpointLoop writes each frozen overlay into bbolt, then drops it and its segment.
func (e *Engine) checkpointLoop() {
	defer close(e.loopDone)
	for range e.ckptReq {
		e.mu.Lock()
		frozen, n := e.frozen, e.frozenN
		e.mu.Unlock()
		err := e.checkpoint(frozen)
		if err == nil {
			// Deleted before anyone waiting is told, so that its space is free for the
			// next segment. One left behind is harmless (replay skips a segment bbolt
			// has passed) and Close deletes it.
			_ = wal.Remove(e.fs, e.path, n)
		}
		e.mu.Lock()
		e.ckptErr = err
		if err == nil {
			e.frozen = nil
			e.gen++
		}
		e.ckptRunning = false
		close(e.ckptDone)
		e.mu.Unlock()
	}
}

// checkpoint writes o into bbolt in one transaction and records its txid.
func (e *Engine) checkpoint(o *overlay) error {
	var txid uint64
	err := e.db.Update(func(btx *bolt.Tx) error {
		txid = uint64(btx.ID())
		if err := putLastSegment(btx, e.lastSeg.Load()); err != nil {
			return err
		}
		return applyOverlay(btx, o, e.reg)
	})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	e.mu.Lock()
	e.baseTxID = txid
	e.mu.Unlock()
	e.checkpoints.Add(1)
	return nil
}

// applyOverlay writes o's entries into btx. Entries come in bucket-number order, and a
// bucket is numbered after its parent, so a bucket's creation comes before its keys.
func applyOverlay(btx *bolt.Tx, o *overlay, reg *bucketRegistry) error {
	buckets := map[uint32]*bolt.Bucket{}
	var resolve func(id uint32) (*bolt.Bucket, error)
	resolve = func(id uint32) (*bolt.Bucket, error) {
		if b, ok := buckets[id]; ok {
			return b, nil
		}
		p := reg.path(id)
		var b *bolt.Bucket
		if p.parent == 0 {
			b = btx.Bucket(p.name)
		} else {
			parent, err := resolve(p.parent)
			if err != nil {
				return nil, err
			}
			b = parent.Bucket(p.name)
		}
		if b == nil {
			return nil, fmt.Errorf("bucket %q (number %d) is missing", p.name, id)
		}
		buckets[id] = b
		return b, nil
	}
	var err error
	o.Ascend(func(en walEntry) bool {
		id, key := entryBucketID(en), en.key()[4:]
		if en.kind == entryBucket && id == 0 {
			_, err = btx.CreateBucketIfNotExists(key)
			return err == nil
		}
		var b *bolt.Bucket
		if b, err = resolve(id); err != nil {
			return false
		}
		switch en.kind {
		case entryBucket:
			// A value deleted and a bucket created in its place leave the bucket's
			// entry alone in the overlay: bbolt still has the value.
			if _, err = b.CreateBucketIfNotExists(key); errors.Is(err, berrors.ErrIncompatibleValue) {
				if err = b.Delete(key); err == nil {
					_, err = b.CreateBucket(key)
				}
			}
		case entryValue:
			err = b.Put(key, en.val())
		default:
			err = b.Delete(key)
		}
		return err == nil
	})
	return err
}

// Stats are the log's totals: record bytes appended, checkpoints made.
func (e *Engine) Stats() (logBytes, checkpoints int64) {
	return e.logBytes.Load(), e.checkpoints.Load()
}

// Checkpoint writes everything committed so far into bbolt and returns once it is there
// (Backup reads bbolt alone).
func (e *Engine) Checkpoint() error {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if err := e.usable(); err != nil {
		return err
	}
	if err := e.finishFrozen(); err != nil {
		return err
	}
	if e.seg.Written == 0 {
		return nil
	}
	if err := e.freeze(); err != nil {
		return err
	}
	return e.finishFrozen()
}

// finishFrozen waits until the frozen overlay, if there is one, is in bbolt, starting
// its checkpoint again if the last try failed.
func (e *Engine) finishFrozen() error {
	e.mu.Lock()
	if e.frozen == nil {
		e.mu.Unlock()
		return nil
	}
	done := e.ckptDone
	if !e.ckptRunning {
		done = e.startCheckpointLocked()
	}
	e.mu.Unlock()
	<-done
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.frozen != nil {
		return e.ckptErr
	}
	return nil
}

// Close writes what the log holds into bbolt, deletes the log and closes bbolt. When
// that fails, the log is left for the next open to replay.
func (e *Engine) Close() error {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.failed()
	if err == nil {
		err = e.finishFrozen()
	}
	close(e.ckptReq)
	<-e.loopDone
	if err == nil && e.seg.Written > 0 {
		err = e.checkpoint(e.cur)
	}
	cerr := e.seg.Close()
	if err == nil && cerr == nil {
		if cerr = wal.RemoveAll(e.fs, e.path); cerr != nil {
			cerr = fmt.Errorf("storage: %w", cerr)
		}
	}
	if dberr := e.db.Close(); err == nil {
		err = dberr
	}
	return errors.Join(err, cerr)
}

// Remove deletes the write-ahead log of the data file at dbPath, which must not be
// open: what the log holds is lost. Restoring a backup over a data file discards that
// file's log with it (a log is refused over a data file it does not belong to).
func Remove(dbPath string) error {
	if err := wal.RemoveAll(wal.OS{}, dbPath); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	return nil
}

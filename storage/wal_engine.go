package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// walEngine is bbolt behind a write-ahead log: the engine Store uses on a data file.
//
// bbolt alone syncs twice per commit (the pages, then the meta page) and rewrites every
// page it touches, ~40 for a group commit at 64 sessions. Here a commit is one record
// appended to the log and one fdatasync; what it wrote goes to the overlay in memory
// (wal_overlay.go), which reads see above bbolt. When the log's segment reaches
// CheckpointBytes, the overlay is frozen, a new segment begins, and a checkpoint writes
// the frozen overlay into bbolt in one ordinary (synced) bbolt transaction, then deletes
// the old segment. bbolt is therefore always a consistent committed state, and the log
// holds everything committed since; on open, what the log holds is replayed into bbolt.
//
// Commits never wait for a checkpoint, unless a second segment fills while the first is
// still being checkpointed (backpressure: memory stays bounded by about twice
// CheckpointBytes of overlay).
type walEngine struct {
	db    *bolt.DB
	path  string
	epoch [16]byte
	reg   *bucketRegistry
	limit int64 // CheckpointBytes

	writeMu sync.Mutex // one Update (or checkpoint request, or Close) at a time
	// Guarded by writeMu:
	seg     *walSegmentFile
	cur     *overlay // the latest committed overlay, which the next Update clones
	defined map[uint32]bool
	payload []byte
	closed  bool

	mu       sync.Mutex // guards the layering readers start from
	top      *overlay
	frozen   *overlay
	frozenN  uint64 // the frozen overlay's segment
	gen      uint64 // bumped whenever the layering changes
	baseTxID uint64 // bbolt's last transaction (a checkpoint's)
	ckptDone chan struct{}
	err      error // the first failure of the log or a checkpoint: the engine is stopped

	ckptReq  chan struct{}
	loopDone chan struct{}
}

// ErrWALFailed wraps the failure that stopped a write-ahead-logged store: after a failed
// log write or checkpoint nothing more is committed (what was acknowledged is in the log,
// and a restart replays it).
var ErrWALFailed = errors.New("write-ahead log stopped")

func (e *walEngine) failed() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

func (e *walEngine) fail(err error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = fmt.Errorf("storage: %w: %w", ErrWALFailed, err)
	}
	return e.err
}

// begin starts a transaction on the current layering. The layering and bbolt's snapshot
// must agree: a checkpoint ending between taking the one and beginning the other would
// leave out, or double, what it moved, so begin retries when the generation changed.
func (e *walEngine) begin(write bool) (*walTx, error) {
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

func (e *walEngine) View(fn func(KVTx) error) error {
	tx, err := e.begin(false)
	if err != nil {
		return err
	}
	defer tx.base.Rollback()
	return fn(tx)
}

func (e *walEngine) Update(fn func(KVTx) error) error {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if err := e.failed(); err != nil {
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
	e.payload = e.encode(e.payload[:0], tx.ops)
	if err := e.seg.append(e.payload); err != nil {
		return e.fail(err)
	}
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
func (e *walEngine) run(tx *walTx, fn func(KVTx) error) error {
	defer tx.base.Rollback()
	return fn(tx)
}

// maybeFreeze starts a checkpoint when the segment is full, first waiting for the one
// in progress if there is one and the segment is full twice over.
func (e *walEngine) maybeFreeze() error {
	if e.seg.written < e.limit {
		return nil
	}
	e.mu.Lock()
	busy, done := e.frozen != nil, e.ckptDone
	e.mu.Unlock()
	if busy {
		if e.seg.written < 2*e.limit {
			return nil
		}
		<-done
		if err := e.failed(); err != nil {
			return err
		}
	}
	return e.freeze()
}

// freeze makes the current overlay the frozen one, begins a new segment, and asks the
// checkpointer to write the frozen overlay into bbolt. No checkpoint may be in progress.
func (e *walEngine) freeze() error {
	e.mu.Lock()
	after := e.baseTxID + 1 // what bbolt's txid will be once the frozen overlay is in
	e.mu.Unlock()
	next, err := createWALSegment(e.path, e.seg.n+1, walSegmentHeader{epoch: e.epoch, baseTxID: after})
	if err != nil {
		return err
	}
	old := e.seg
	e.seg, e.defined = next, map[uint32]bool{}
	e.mu.Lock()
	e.frozen, e.frozenN = e.cur, old.n
	e.cur = newOverlay()
	e.top = e.cur
	e.gen++
	e.ckptDone = make(chan struct{})
	e.mu.Unlock()
	if err := old.close(); err != nil {
		return e.fail(err)
	}
	e.ckptReq <- struct{}{}
	return nil
}

// checkpointLoop writes each frozen overlay into bbolt, then drops it and its segment.
func (e *walEngine) checkpointLoop() {
	defer close(e.loopDone)
	for range e.ckptReq {
		e.mu.Lock()
		frozen, n, done := e.frozen, e.frozenN, e.ckptDone
		e.mu.Unlock()
		err := e.checkpoint(frozen)
		if err == nil {
			err = removeWALSegment(e.path, n)
		}
		if err != nil {
			e.fail(err)
		} else {
			e.mu.Lock()
			e.frozen = nil
			e.gen++
			e.mu.Unlock()
		}
		close(done)
	}
}

// checkpoint writes o into bbolt in one transaction and records its txid.
func (e *walEngine) checkpoint(o *overlay) error {
	var txid uint64
	err := e.db.Update(func(btx *bolt.Tx) error {
		txid = uint64(btx.ID())
		return applyOverlay(btx, o, e.reg)
	})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	e.mu.Lock()
	e.baseTxID = txid
	e.mu.Unlock()
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
		id, key := entryBucketID(en), en.key[4:]
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
			_, err = b.CreateBucketIfNotExists(key)
		case entryValue:
			err = b.Put(key, en.val)
		default:
			err = b.Delete(key)
		}
		return err == nil
	})
	return err
}

// Checkpoint writes everything committed so far into bbolt and returns once it is there
// (Backup reads bbolt alone).
func (e *walEngine) Checkpoint() error {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.mu.Lock()
	done := e.ckptDone
	e.mu.Unlock()
	<-done
	if err := e.failed(); err != nil {
		return err
	}
	if e.seg.written == 0 {
		return nil
	}
	if err := e.freeze(); err != nil {
		return err
	}
	e.mu.Lock()
	done = e.ckptDone
	e.mu.Unlock()
	<-done
	return e.failed()
}

// Close writes what the log holds into bbolt, deletes the log and closes bbolt. After a
// failure the log is left for the next open to replay.
func (e *walEngine) Close() error {
	e.writeMu.Lock()
	defer e.writeMu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	close(e.ckptReq)
	<-e.loopDone
	err := e.failed()
	if err == nil && e.seg.written > 0 {
		if err = e.checkpoint(e.cur); err != nil {
			err = e.fail(err)
		}
	}
	cerr := e.seg.close()
	if err == nil && cerr == nil {
		cerr = removeWALSegment(e.path, e.seg.n)
	}
	if dberr := e.db.Close(); err == nil {
		err = dberr
	}
	return errors.Join(err, cerr)
}

func removeWALSegment(dbPath string, n uint64) error {
	path := walSegmentPath(dbPath, n)
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("storage: remove write-ahead log: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// encode appends ops to p as a log record's payload. A bucket is named ('N': number,
// parent's number, name) before the first record of the segment that uses its number.
//
//	'P' bucket key value | 'D' bucket key | 'B' parent name  (numbers uvarint, bytes
//	length-prefixed)
func (e *walEngine) encode(p []byte, ops []walOp) []byte {
	for _, op := range ops {
		p = e.define(p, op.id)
		switch op.kind {
		case entryValue:
			p = append(p, 'P')
			p = binary.AppendUvarint(p, uint64(op.id))
			p = appendBytes(p, op.key)
			p = appendBytes(p, op.val)
		case entryTombstone:
			p = append(p, 'D')
			p = binary.AppendUvarint(p, uint64(op.id))
			p = appendBytes(p, op.key)
		case entryBucket:
			p = append(p, 'B')
			p = binary.AppendUvarint(p, uint64(op.id))
			p = appendBytes(p, op.key)
		}
	}
	return p
}

func (e *walEngine) define(p []byte, id uint32) []byte {
	if id == 0 || e.defined[id] {
		return p
	}
	path := e.reg.path(id)
	p = e.define(p, path.parent)
	p = append(p, 'N')
	p = binary.AppendUvarint(p, uint64(id))
	p = binary.AppendUvarint(p, uint64(path.parent))
	p = appendBytes(p, path.name)
	e.defined[id] = true
	return p
}

package storage

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// walMeta is the root bucket holding the data file's epoch, the random value its log
// segments carry so that a log is never replayed over another file.
const walMeta = "duraton.wal"

// openWALEngine puts the write-ahead log in front of db (open, with nothing written
// since): it replays what a previous process logged and did not checkpoint, deletes
// that log, makes sure the file has an epoch, and starts a new segment.
func openWALEngine(db *bolt.DB, limit int64) (*walEngine, error) {
	path := db.Path()
	segs, err := walSegments(path)
	if err != nil {
		return nil, fmt.Errorf("storage: list write-ahead log: %w", err)
	}
	if len(segs) > 0 {
		if err := replayWAL(db, segs); err != nil {
			return nil, err
		}
		if err := removeWALSegments(path); err != nil {
			return nil, err
		}
	}
	var epoch [16]byte
	var txid uint64
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists([]byte(walMeta))
		if err != nil {
			return err
		}
		if v := meta.Get([]byte("epoch")); len(v) == len(epoch) {
			copy(epoch[:], v)
		} else {
			_, _ = rand.Read(epoch[:])
			if err := meta.Put([]byte("epoch"), epoch[:]); err != nil {
				return err
			}
		}
		txid = uint64(tx.ID())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: initialise %s: %w", path, err)
	}
	next := uint64(1)
	if len(segs) > 0 {
		next = segs[len(segs)-1] + 1
	}
	seg, err := createWALSegment(path, next, walSegmentHeader{epoch: epoch, baseTxID: txid}, extendBy(limit))
	if err != nil {
		return nil, err
	}
	cur := newOverlay()
	done := make(chan struct{})
	close(done)
	e := &walEngine{
		db: db, path: path, epoch: epoch, reg: newBucketRegistry(), limit: limit,
		seg: seg, cur: cur, defined: map[uint32]bool{},
		top: cur, baseTxID: txid, ckptDone: done,
		ckptReq: make(chan struct{}, 1), loopDone: make(chan struct{}),
	}
	go e.checkpointLoop()
	return e, nil
}

// replayWAL applies the log's segments that bbolt does not hold yet, in one bbolt
// transaction. A segment whose base txid is below bbolt's was checkpointed (its file
// outlived the checkpoint by a crash); the first one that was not must apply on exactly
// bbolt's txid, or the log belongs to another state of the file (a restored backup, a
// replaced file) and is refused.
func replayWAL(db *bolt.DB, segs []uint64) error {
	path := db.Path()
	var epoch []byte
	var txid uint64
	if err := db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket([]byte(walMeta)); meta != nil {
			epoch = bytes.Clone(meta.Get([]byte("epoch")))
		}
		txid = uint64(tx.ID())
		return nil
	}); err != nil {
		return fmt.Errorf("storage: replay write-ahead log: %w", err)
	}
	type segment struct {
		n       uint64
		h       walSegmentHeader
		records [][]byte
	}
	var todo []segment
	for i, n := range segs {
		last := i == len(segs)-1
		h, records, torn, err := readWALSegment(path, n)
		switch {
		case errors.Is(err, errWALNoHeader) && last:
			continue // created, never written to
		case err != nil:
			return fmt.Errorf("storage: write-ahead log %s: %w: %v", walSegmentPath(path, n), ErrCorrupt, err)
		case torn && !last:
			// Only the segment being written can end in a torn record.
			return fmt.Errorf("storage: write-ahead log %s: %w: a damaged record before the last segment", walSegmentPath(path, n), ErrCorrupt)
		case !bytes.Equal(h.epoch[:], epoch):
			return fmt.Errorf("storage: write-ahead log %s belongs to another data file than %s (replaced or restored?): %w; move the log away to open the data file as it is", walSegmentPath(path, n), path, ErrCorrupt)
		case h.baseTxID < txid:
			continue // checkpointed already
		}
		if want := txid + uint64(len(todo)); h.baseTxID != want {
			return fmt.Errorf("storage: write-ahead log %s applies on transaction %d, the data file %s is at %d (restored from a backup?): %w; move the log away to open the data file as it is", walSegmentPath(path, n), h.baseTxID, path, want, ErrCorrupt)
		}
		todo = append(todo, segment{n: n, h: h, records: records})
	}
	// One bbolt transaction per segment, as its checkpoint would have been: bbolt's txid
	// then says how far replay got, and a crash before the log is deleted replays none
	// of it twice.
	for _, s := range todo {
		err := db.Update(func(tx *bolt.Tx) error {
			r := replayer{tx: tx, buckets: map[uint64]*bolt.Bucket{}, names: map[uint64]bucketName{}}
			for _, rec := range s.records {
				if err := r.apply(rec); err != nil {
					return fmt.Errorf("%s: %w", walSegmentPath(path, s.n), err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("storage: replay write-ahead log: %w", err)
		}
	}
	return nil
}

// replayer applies one segment's records; bucket numbers are the segment's own.
type replayer struct {
	tx      *bolt.Tx
	buckets map[uint64]*bolt.Bucket
	names   map[uint64]bucketName
}

type bucketName struct {
	parent uint64
	name   []byte
}

var errBadRecord = fmt.Errorf("%w: a malformed write-ahead log record", ErrCorrupt)

func (r *replayer) bucket(id uint64) (*bolt.Bucket, error) {
	if b, ok := r.buckets[id]; ok {
		return b, nil
	}
	n, ok := r.names[id]
	if !ok {
		return nil, errBadRecord
	}
	var b *bolt.Bucket
	if n.parent == 0 {
		b = r.tx.Bucket(n.name)
	} else {
		parent, err := r.bucket(n.parent)
		if err != nil {
			return nil, err
		}
		b = parent.Bucket(n.name)
	}
	if b == nil {
		return nil, fmt.Errorf("%w: bucket %q of a write-ahead log record is missing", ErrCorrupt, n.name)
	}
	r.buckets[id] = b
	return b, nil
}

func (r *replayer) apply(p []byte) error {
	for len(p) > 0 {
		op := p[0]
		p = p[1:]
		id, n := binary.Uvarint(p)
		if n <= 0 {
			return errBadRecord
		}
		p = p[n:]
		var a, b []byte
		var ok bool
		switch op {
		case 'N':
			parent, n := binary.Uvarint(p)
			if n <= 0 {
				return errBadRecord
			}
			if a, p, ok = cutBytes(p[n:]); !ok {
				return errBadRecord
			}
			r.names[id] = bucketName{parent: parent, name: a}
		case 'P':
			if a, p, ok = cutBytes(p); !ok {
				return errBadRecord
			}
			if b, p, ok = cutBytes(p); !ok {
				return errBadRecord
			}
			bk, err := r.bucket(id)
			if err != nil {
				return err
			}
			if err := bk.Put(a, b); err != nil {
				return err
			}
		case 'D':
			if a, p, ok = cutBytes(p); !ok {
				return errBadRecord
			}
			bk, err := r.bucket(id)
			if err != nil {
				return err
			}
			if err := bk.Delete(a); err != nil {
				return err
			}
		case 'B':
			if a, p, ok = cutBytes(p); !ok {
				return errBadRecord
			}
			if id == 0 {
				_, err := r.tx.CreateBucketIfNotExists(a)
				if err != nil {
					return err
				}
				continue
			}
			bk, err := r.bucket(id)
			if err != nil {
				return err
			}
			if _, err := bk.CreateBucketIfNotExists(a); err != nil {
				return err
			}
		default:
			return errBadRecord
		}
	}
	return nil
}

func cutBytes(p []byte) (b, rest []byte, ok bool) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, nil, false
	}
	return p[k : k+int(n)], p[k+int(n):], true
}

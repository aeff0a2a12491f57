package walkv

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/duraton/duraton/storage/internal/wal"
	"github.com/duraton/duraton/storage/kv"
)

// walMeta is the root bucket holding the data file's epoch, the random value its log
// segments carry so that a log is never replayed over another file, and the highest
// segment number its log has used ("segment"), so that numbers never repeat.
const walMeta = "duraton.wal"

// walExtendBy is how much zero-filled space is added when a commit reaches the end of
// what is allocated (less when checkpoints come sooner): about one extra fdatasync of
// metadata per MiB of log.
const walExtendBy = 1 << 20

// Config is what Open needs besides the data file.
type Config struct {
	// CheckpointBytes is how much log accumulates before a checkpoint moves it into
	// bbolt (storage.Options.CheckpointBytes, already defaulted).
	CheckpointBytes int64
	// FS is the log's filesystem: wal.OS when nil, or a test's.
	FS wal.FS
}

// Open puts the write-ahead log in front of db (open, with nothing written
// since): it replays what a previous process logged and did not checkpoint, deletes
// that log, makes sure the file has an epoch, and starts a new segment. A damaged log
// is refused (kv.ErrCorrupt, naming the file and the offset) before anything is written.
func Open(db *bolt.DB, cfg Config) (*Engine, error) {
	if cfg.FS == nil {
		cfg.FS = wal.OS{}
	}
	path := db.Path()
	segs, err := wal.List(cfg.FS, path)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	if len(segs) > 0 {
		if err := replayWAL(db, cfg.FS, segs); err != nil {
			return nil, err
		}
		if err := wal.RemoveAll(cfg.FS, path); err != nil {
			return nil, fmt.Errorf("storage: %w", err)
		}
	}
	var epoch [16]byte
	var txid uint64
	next := uint64(1)
	if len(segs) > 0 {
		next = segs[len(segs)-1] + 1
	}
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
		if v := meta.Get([]byte("segment")); len(v) == 8 {
			next = max(next, binary.BigEndian.Uint64(v)+1)
		}
		txid = uint64(tx.ID())
		return putLastSegment(tx, next)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: initialise %s: %w", path, err)
	}
	e := &Engine{
		db: db, fs: cfg.FS, path: path, epoch: epoch, reg: newBucketRegistry(), limit: cfg.CheckpointBytes,
		defined: map[uint32]bool{}, pending: map[uint32]bool{},
		baseTxID: txid, ckptReq: make(chan struct{}, 1), loopDone: make(chan struct{}),
	}
	seg, err := wal.Create(cfg.FS, path, next, wal.Header{Epoch: epoch, BaseTxID: txid}, e.segConfig())
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	e.lastSeg.Store(next)
	e.seg = seg
	e.cur = newOverlay()
	e.top = e.cur
	e.ckptDone = make(chan struct{})
	close(e.ckptDone)
	go e.checkpointLoop()
	return e, nil
}

// putLastSegment records n as the highest segment number used.
func putLastSegment(tx *bolt.Tx, n uint64) error {
	meta, err := tx.CreateBucketIfNotExists([]byte(walMeta))
	if err != nil {
		return err
	}
	if v := meta.Get([]byte("segment")); len(v) == 8 && binary.BigEndian.Uint64(v) >= n {
		return nil
	}
	return meta.Put([]byte("segment"), binary.BigEndian.AppendUint64(nil, n))
}

// walSegment is a segment replay applies.
type walSegment struct {
	n       uint64
	records []wal.Record
}

// replayWAL applies the log's segments that bbolt does not hold yet, in one bbolt
// transaction each. Nothing is written unless the whole log reads back clean.
func replayWAL(db *bolt.DB, fsys wal.FS, segs []uint64) error {
	path := db.Path()
	todo, err := planReplay(db, fsys, segs)
	if err != nil {
		return err
	}
	// One bbolt transaction per segment, as its checkpoint would have been: bbolt's txid
	// then says how far replay got, and a crash before the log is deleted replays none
	// of it twice.
	for _, s := range todo {
		err := db.Update(func(tx *bolt.Tx) error {
			r := replayer{tx: tx, buckets: map[uint64]*bolt.Bucket{}, names: map[uint64]bucketName{}}
			for _, rec := range s.records {
				if err := r.apply(rec.Payload); err != nil {
					return fmt.Errorf("%s at offset %d: %w", wal.Path(path, s.n), rec.Offset, err)
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

// planReplay reads the log and returns the segments replay applies. A segment whose
// base txid is below bbolt's was checkpointed (its file outlived the checkpoint by a
// crash) and is skipped whatever it holds; the first one that was not must apply on
// exactly bbolt's txid, or the log belongs to another state of the file (a restored
// backup, a replaced file) and is refused. A damaged segment is refused with a
// *wal.DamageError wrapped in kv.ErrCorrupt.
func planReplay(db *bolt.DB, fsys wal.FS, segs []uint64) ([]walSegment, error) {
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
		return nil, fmt.Errorf("storage: replay write-ahead log: %w", err)
	}
	var todo []walSegment
	for i, n := range segs {
		last := i == len(segs)-1
		c, err := wal.Read(fsys, path, n, last)
		var damage *wal.DamageError
		switch {
		case errors.Is(err, wal.ErrNoHeader) && last:
			continue // created, never written to
		case errors.As(err, &damage) && damage.Offset > 0 && bytes.Equal(c.Header.Epoch[:], epoch) && c.Header.BaseTxID < txid:
			continue // checkpointed already: bbolt holds all it held
		case err != nil:
			return nil, fmt.Errorf("storage: %w: %w", kv.ErrCorrupt, err)
		case !bytes.Equal(c.Header.Epoch[:], epoch):
			return nil, fmt.Errorf("storage: write-ahead log %s belongs to another data file than %s (replaced or restored?): %w; move the log away to open the data file as it is", wal.Path(path, n), path, kv.ErrCorrupt)
		case c.Header.BaseTxID < txid:
			continue // checkpointed already
		}
		if want := txid + uint64(len(todo)); c.Header.BaseTxID != want {
			return nil, fmt.Errorf("storage: write-ahead log %s applies on transaction %d, the data file %s is at %d (restored from a backup?): %w; move the log away to open the data file as it is", wal.Path(path, n), c.Header.BaseTxID, path, want, kv.ErrCorrupt)
		}
		todo = append(todo, walSegment{n: n, records: c.Records})
	}
	return todo, nil
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

var errBadRecord = fmt.Errorf("%w: a malformed write-ahead log record", kv.ErrCorrupt)

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
		return nil, fmt.Errorf("%w: bucket %q of a write-ahead log record is missing", kv.ErrCorrupt, n.name)
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

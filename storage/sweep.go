package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/duraton/duraton/storage/kv"
)

// The retention sweep's indexes. A sweep must reach what it removes without walking
// what it keeps: runs that ended, by end time ("runended"), and deduplication records,
// by expiry ("dedupexpiry"). Before them the run sweep took the oldest runs whatever
// their state, so a thousand old runs still sleeping or waiting (waits of up to a year
// are allowed) stopped it for good, and the dedup sweep decoded every record of the
// bucket under the writer's lock.
//
// An index entry may outlive what it names (a run that was restarted, a dedup record
// put again with a later expiry): the sweep checks the record and removes a stale
// entry alone. Entries are written with the records, so only data files from before
// the indexes need them built: migrateSweepIndexes does that on open, per project, in
// small transactions, and marks the project done.

const (
	bucketRunEnded    = "runended"    // end time (unix ms) ‖ run id → nothing
	bucketDedupExpiry = "dedupexpiry" // expiry (unix ms) ‖ dedup id → nothing

	// keySweepIndexes, in a project's "meta" bucket, marks the indexes built.
	keySweepIndexes = "sweepindexes"
)

// timeKey is t (unix ms; below 0 taken as 0) ‖ id: an index key in time order.
func timeKey(ms int64, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(max(ms, 0)))
	return append(k, id...)
}

// indexEndedRun adds r to the ended-runs index if it has ended.
func (t *Tx) indexEndedRun(project string, r *Run) error {
	if r.Live() {
		return nil
	}
	b, err := t.writeBucket(project, bucketRunEnded)
	if err != nil {
		return err
	}
	return b.Put(timeKey(r.EndedAt, r.ID), nil)
}

// DeleteRunsEndedBefore removes up to limit runs that ended before beforeMs, oldest end
// first, with everything they hold, through the ended-runs index: live runs, however
// old, are never looked at. Stale index entries it meets are removed and counted, so
// a count of limit means more may remain. A run that cannot be read is an error, never
// skipped.
func (t *Tx) DeleteRunsEndedBefore(project string, beforeMs int64, limit int) (int, error) {
	idx := t.bucket(project, bucketRunEnded)
	if idx == nil {
		return 0, nil
	}
	keys := dueKeys(idx, beforeMs, limit)
	for _, k := range keys {
		endedAt, id := int64(binary.BigEndian.Uint64(k[:8])), string(k[8:])
		r, err := t.Run(project, id)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return 0, err
		case !r.Live() && max(r.EndedAt, 0) == endedAt:
			if err := t.DeleteRun(project, r); err != nil {
				return 0, err
			}
			continue // DeleteRun removed the entry
		}
		if err := idx.Delete(k); err != nil { // stale: the run is gone, live again or ended later
			return 0, err
		}
	}
	return len(keys), nil
}

// dueKeys copies up to limit keys of the time index b whose time is below beforeMs.
func dueKeys(b kv.Bucket, beforeMs int64, limit int) [][]byte {
	var out [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
		if len(k) < 8 || int64(binary.BigEndian.Uint64(k[:8])) >= beforeMs {
			break
		}
		out = append(out, bytes.Clone(k))
	}
	return out
}

// PutDedup stores a deduplication record and indexes it by expiry.
func (t *Tx) PutDedup(project, id string, r *DedupRecord) error {
	b, err := t.writeBucket(project, bucketDedup)
	if err != nil {
		return err
	}
	if err := put(b, id, r); err != nil {
		return err
	}
	idx, err := t.writeBucket(project, bucketDedupExpiry)
	if err != nil {
		return err
	}
	return idx.Put(timeKey(r.ExpiresAt, id), nil)
}

// DeleteExpiredDedup removes up to limit records that expired before nowMs, through the
// expiry index: records still valid are never read. Stale index entries it meets are
// removed and counted. A record that cannot be decoded is an error, never skipped.
func (t *Tx) DeleteExpiredDedup(project string, nowMs int64, limit int) (int, error) {
	idx := t.bucket(project, bucketDedupExpiry)
	if idx == nil {
		return 0, nil
	}
	b := t.bucket(project, bucketDedup)
	keys := dueKeys(idx, nowMs, limit)
	for _, k := range keys {
		expires, id := int64(binary.BigEndian.Uint64(k[:8])), k[8:]
		var v []byte
		if b != nil {
			v = b.Get(id)
		}
		if v != nil {
			var r DedupRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return 0, fmt.Errorf("dedup record %q: %w", id, err)
			}
			if max(r.ExpiresAt, 0) == expires {
				if err := b.Delete(id); err != nil {
					return 0, err
				}
			}
		}
		if err := idx.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// migrateBatch bounds the records one transaction of migrateSweepIndexes reads.
const migrateBatch = 1000

// migrateSweepIndexes builds the sweep indexes of every project that has not got them
// (a data file from before them), in transactions of at most migrateBatch records, and
// marks each project done. It stops at a record it cannot decode: that is damage,
// which `duraton check` or a restore deals with, not something to skip.
func migrateSweepIndexes(e kv.Engine) error {
	var projects []string
	err := e.View(func(ktx kv.Tx) error {
		root := ktx.Bucket([]byte(bucketProjects))
		if root == nil {
			return nil // a read failed: the engine fails the View with it
		}
		return root.ForEachBucket(func(name []byte) error {
			project := root.Bucket(name)
			if project == nil {
				return nil // as above
			}
			meta := project.Bucket([]byte(bucketMeta))
			if meta == nil || meta.Get([]byte(keySweepIndexes)) == nil {
				projects = append(projects, string(name))
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, p := range projects {
		err := backfill(e, p, bucketRuns, func(tx *Tx, k, v []byte) error {
			var r Run
			if err := decodeRun(v, &r); err != nil {
				return fmt.Errorf("run %q: %w", k, err)
			}
			return tx.indexEndedRun(p, &r)
		})
		if err == nil {
			err = backfill(e, p, bucketDedup, func(tx *Tx, k, v []byte) error {
				var r DedupRecord
				if err := json.Unmarshal(v, &r); err != nil {
					return fmt.Errorf("dedup record %q: %w", k, err)
				}
				idx, err := tx.writeBucket(p, bucketDedupExpiry)
				if err != nil {
					return err
				}
				return idx.Put(timeKey(r.ExpiresAt, string(k)), nil)
			})
		}
		if err == nil {
			err = e.Update(func(ktx kv.Tx) error {
				meta, err := (&Tx{tx: ktx}).writeBucket(p, bucketMeta)
				if err != nil {
					return err
				}
				return meta.Put([]byte(keySweepIndexes), []byte{1})
			})
		}
		if err != nil {
			return fmt.Errorf("storage: build the retention indexes of project %q: %w", p, err)
		}
	}
	return nil
}

// backfill calls index for every record of a project's bucket, migrateBatch records per
// transaction.
func backfill(e kv.Engine, project, bucket string, index func(tx *Tx, k, v []byte) error) error {
	var after []byte
	for {
		var last []byte
		err := e.Update(func(ktx kv.Tx) error {
			tx := &Tx{tx: ktx}
			last = nil
			b := tx.bucket(project, bucket)
			if b == nil {
				return nil
			}
			// Read a batch first, then write: no write lands under the open cursor.
			var keys, vals [][]byte
			c := b.Cursor()
			k, v := c.First()
			if after != nil {
				if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(keys) < migrateBatch; k, v = c.Next() {
				if v != nil {
					keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
				}
				last = bytes.Clone(k)
			}
			for i := range keys {
				if err := index(tx, keys[i], vals[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil || last == nil {
			return err
		}
		after = last
	}
}

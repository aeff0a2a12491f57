package walkv_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/duraton/duraton/storage/internal/walkv"
	"github.com/duraton/duraton/storage/kv"
)

// Recovery and crash tests of the write-ahead-logged engine (this package). A crash
// is CrashForTest: the segment file and bbolt are closed as a killed process
// leaves them, without Close's checkpoint and without deleting the log. States a crash
// can leave that a clean run never shows (a crash inside a checkpoint, inside a replay)
// are built from copies of the real files taken at the right moments.

// --- helpers -------------------------------------------------------------------------

const walHeader = 36 // "DWAL0001" | epoch | base txid | crc

type checkpointer interface{ Checkpoint() error }

// bothWays runs f as two parallel subtests, name=false and name=true.
func bothWays(t *testing.T, name string, f func(t *testing.T, on bool)) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("%s=%v", name, on), func(t *testing.T) {
			t.Parallel()
			f(t, on)
		})
	}
}

// walDataFile is a fresh directory for a log-backed store and its data file's path.
func walDataFile(t *testing.T) (dir, db string) {
	dir = t.TempDir()
	return dir, filepath.Join(dir, "kv.db")
}

func openWAL(t require.TestingT, dir string, limit int64) kv.Engine {
	e, err := walkv.OpenForTest(dir, limit)
	require.NoError(t, err)
	return e
}

func crashWAL(t require.TestingT, e kv.Engine) {
	require.NoError(t, walkv.CrashForTest(e))
}

func forceCheckpoint(t require.TestingT, e kv.Engine) {
	require.NoError(t, e.(checkpointer).Checkpoint())
}

// walSegs lists the log's segment files of the data file at db, in order.
func walSegs(t require.TestingT, db string) []string {
	entries, err := os.ReadDir(filepath.Dir(db))
	require.NoError(t, err)
	var out []string
	for _, en := range entries {
		hex, ok := strings.CutPrefix(en.Name(), filepath.Base(db)+"-wal.")
		if !ok {
			continue
		}
		require.Len(t, hex, 16, "segment file %s", en.Name())
		_, err := strconv.ParseUint(hex, 16, 64)
		require.NoError(t, err, "segment file %s", en.Name())
		out = append(out, filepath.Join(filepath.Dir(db), en.Name()))
	}
	slices.Sort(out)
	return out
}

func segNumber(t require.TestingT, path string) uint64 {
	n, err := strconv.ParseUint(path[len(path)-16:], 16, 64)
	require.NoError(t, err)
	return n
}

// walRecord is where a record lies in its segment file.
type walRecord struct{ off, length int }

// walRecords parses a segment's records up to its end mark (a zero length).
func walRecords(t require.TestingT, path string) []walRecord {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(data), walHeader)
	require.Equal(t, "DWAL0001", string(data[:8]))
	var out []walRecord
	for off := walHeader; off+8 <= len(data); {
		n := int(binary.BigEndian.Uint32(data[off:]))
		if n == 0 {
			break
		}
		require.LessOrEqual(t, off+8+n, len(data), "record at %d of %s", off, path)
		out = append(out, walRecord{off: off, length: n})
		off += 8 + n
	}
	return out
}

func readFile(t require.TestingT, path string) []byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func writeFile(t require.TestingT, path string, b []byte) {
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

// patchFile overwrites bytes of a file at off.
func patchFile(t require.TestingT, path string, off int64, b []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// flipByte inverts one byte of a file.
func flipByte(t require.TestingT, path string, off int) {
	data := readFile(t, path)
	data[off] ^= 0xff
	writeFile(t, path, data)
}

// A model is the expected content, flattened: "a/sub/k" is key k of bucket sub in root
// bucket a, "a/sub/" says bucket sub exists. Keys and bucket names never contain '/'
// and values are never empty.
type model map[string]string

func (m model) clone() model {
	c := make(model, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// ensure records that the buckets of path exist.
func (m model) ensure(path []string) {
	for i := range path {
		m[strings.Join(path[:i+1], "/")+"/"] = ""
	}
}

// openPath opens (creating) the nested buckets of path.
func openPath(tx kv.Tx, path []string) (kv.Bucket, error) {
	b, err := tx.CreateBucketIfNotExists([]byte(path[0]))
	if err != nil {
		return nil, err
	}
	for _, name := range path[1:] {
		if b, err = b.CreateBucketIfNotExists([]byte(name)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// dump reads everything under the root buckets named, checking on the way that the
// cursors' walks forward and backward, Seek, ForEach, Get, KeyCount and Bucket agree.
func dump(t require.TestingT, tx kv.Tx, roots []string) model {
	out := model{}
	for _, r := range roots {
		b := tx.Bucket([]byte(r))
		if b == nil {
			continue
		}
		out[r+"/"] = ""
		dumpBucket(t, b, r+"/", out)
	}
	return out
}

type pair struct{ k, v string }

func dumpBucket(t require.TestingT, b kv.Bucket, prefix string, out model) {
	var fwd, back, each []pair
	isBucket := map[string]bool{}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		fwd = append(fwd, pair{string(k), string(v)})
		isBucket[string(k)] = v == nil
	}
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		back = append(back, pair{string(k), string(v)})
	}
	slices.Reverse(back)
	require.Equal(t, fwd, back, "%s: the walk backward is not the walk forward reversed", prefix)
	require.True(t, slices.IsSortedFunc(fwd, func(a, b pair) int { return strings.Compare(a.k, b.k) }), "%s: walk out of order", prefix)
	for i := 1; i < len(fwd); i++ {
		require.NotEqual(t, fwd[i-1].k, fwd[i].k, "%s: key twice", prefix)
	}
	require.NoError(t, b.ForEach(func(k, v []byte) error {
		each = append(each, pair{string(k), string(v)})
		return nil
	}))
	require.Equal(t, fwd, each, "%s: ForEach", prefix)
	values := 0
	for i, p := range fwd {
		// Seek lands on the key; just after it, on the next one; Prev from there goes back.
		k, v := c.Seek([]byte(p.k))
		require.Equal(t, p.k, string(k), "%s: Seek(%q)", prefix, p.k)
		require.Equal(t, p.v, string(v))
		k, _ = c.Seek([]byte(p.k + "\x00"))
		if i+1 < len(fwd) {
			require.Equal(t, fwd[i+1].k, string(k), "%s: Seek after %q", prefix, p.k)
			k, _ = c.Prev()
			require.Equal(t, p.k, string(k), "%s: Prev after Seek", prefix)
		} else {
			require.Nil(t, k, "%s: Seek past the last key", prefix)
		}
		if isBucket[p.k] {
			require.Nil(t, b.Get([]byte(p.k)), "%s: Get of bucket %q", prefix, p.k)
			sub := b.Bucket([]byte(p.k))
			require.NotNil(t, sub, "%s: bucket %q", prefix, p.k)
			out[prefix+p.k+"/"] = ""
			dumpBucket(t, sub, prefix+p.k+"/", out)
			continue
		}
		values++
		require.Nil(t, b.Bucket([]byte(p.k)), "%s: %q is a value", prefix, p.k)
		require.Equal(t, p.v, string(b.Get([]byte(p.k))), "%s: Get(%q)", prefix, p.k)
		out[prefix+p.k] = p.v
	}
	require.Equal(t, values, b.KeyCount(), "%s: KeyCount", prefix)
}

// requireContent checks that e holds exactly m under the root buckets named.
func requireContent(t require.TestingT, e kv.Engine, roots []string, m model) {
	require.NoError(t, e.View(func(tx kv.Tx) error {
		require.Equal(t, map[string]string(m), map[string]string(dump(t, tx, roots)))
		return nil
	}))
}

var errRollback = errors.New("rolled back on purpose")

// workload commits n transactions of puts, deletes and nested buckets (a new root bucket
// and nested buckets every so often), every seventh one rolled back, into e and m.
func workload(t require.TestingT, e kv.Engine, m model, roots *[]string, from, n int) {
	for i := from; i < from+n; i++ {
		root := fmt.Sprintf("r%d", i/40)
		if !slices.Contains(*roots, root) {
			*roots = append(*roots, root)
		}
		paths := [][]string{{root}, {root, "sub"}, {root, "sub", "deep"}}
		commitModel(t, e, m, i%7 == 3, func(tx kv.Tx, pending model) error {
			for j := range 4 {
				path := paths[(i+j)%len(paths)]
				b, err := openPath(tx, path)
				if err != nil {
					return err
				}
				pending.ensure(path)
				k := fmt.Sprintf("k%03d", (i*7+j*13)%50)
				if (i+j)%5 == 0 {
					err = deleteTracked(b, pending, path, k)
				} else {
					err = putTracked(b, pending, path, k, fmt.Sprintf("v%d.%d-%s", i, j, strings.Repeat("x", i%30)))
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// commitModel runs apply in one Update of e and on a copy of m, which becomes m when the
// Update commits. With rollback the Update ends in errRollback and m stays as it was.
func commitModel(t require.TestingT, e kv.Engine, m model, rollback bool, apply func(tx kv.Tx, pending model) error) {
	pending := m.clone()
	err := e.Update(func(tx kv.Tx) error {
		if err := apply(tx, pending); err != nil {
			return err
		}
		if rollback {
			return errRollback
		}
		return nil
	})
	if rollback {
		require.ErrorIs(t, err, errRollback)
		return
	}
	require.NoError(t, err)
	clear(m)
	maps.Copy(m, pending)
}

// putTracked puts k = v into b, the bucket at path, and into pending.
func putTracked(b kv.Bucket, pending model, path []string, k, v string) error {
	if err := b.Put([]byte(k), []byte(v)); err != nil {
		return err
	}
	pending[strings.Join(path, "/")+"/"+k] = v
	return nil
}

// deleteTracked deletes k from b, the bucket at path, and from pending.
func deleteTracked(b kv.Bucket, pending model, path []string, k string) error {
	if err := b.Delete([]byte(k)); err != nil {
		return err
	}
	delete(pending, strings.Join(path, "/")+"/"+k)
	return nil
}

// --- 1. crash and recover ----------------------------------------------------------------

// Transactions committed with checkpoints every 2 KiB are partly in bbolt, partly in the
// log (the last segment, maybe one being checkpointed) when the process dies. Reopening
// has every committed write and nothing rolled back, deletes the old log, and what it
// recovered survives a clean Close and another open.
func TestWALCrashRecoversEveryCommit(t *testing.T) {
	t.Parallel()
	dir, db := walDataFile(t)
	e := openWAL(t, dir, 2<<10)
	m, roots := model{}, []string{}
	workload(t, e, m, &roots, 0, 300)
	requireContent(t, e, roots, m)
	crashWAL(t, e)

	segs := walSegs(t, db)
	require.NotEmpty(t, segs)
	last := segs[len(segs)-1]
	require.Greater(t, segNumber(t, last), uint64(3), "checkpoints were made")
	require.NotEmpty(t, walRecords(t, last), "the last transactions are in the log only")

	e = openWAL(t, dir, 2<<10)
	requireContent(t, e, roots, m)
	after := walSegs(t, db)
	require.Len(t, after, 1, "the replayed log is deleted, a new segment begun")
	require.Greater(t, segNumber(t, after[0]), segNumber(t, last))
	require.Empty(t, walRecords(t, after[0]))

	// More work on the recovered engine, a clean Close, another open.
	workload(t, e, m, &roots, 300, 60)
	require.NoError(t, e.Close())
	require.Empty(t, walSegs(t, db), "Close deletes the log")
	e = openWAL(t, dir, 2<<10)
	requireContent(t, e, roots, m)
	require.NoError(t, e.Close())
}

// A crash before anything was written, and one right after a checkpoint that left the
// new segment empty: both reopen to the same content.
func TestWALCrashWithEmptyLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openWAL(t, dir, 1<<20)
	crashWAL(t, e)
	e = openWAL(t, dir, 1<<20)
	requireContent(t, e, []string{"r0"}, model{})
	m, roots := model{}, []string{}
	workload(t, e, m, &roots, 0, 20)
	forceCheckpoint(t, e)
	crashWAL(t, e)
	e = openWAL(t, dir, 1<<20)
	requireContent(t, e, roots, m)
	require.NoError(t, e.Close())
}

// --- 2. a torn tail ----------------------------------------------------------------------

// The last record of the last segment, damaged in each way a crash in the middle of its
// write can leave it, was never acknowledged: reopening drops it and keeps every
// transaction before it, and the store goes on normally.
func TestWALTornTailIsDropped(t *testing.T) {
	t.Parallel()
	tears := map[string]func(t *testing.T, seg string, r walRecord){
		"payload byte flipped": func(t *testing.T, seg string, r walRecord) {
			flipByte(t, seg, r.off+8+r.length/2)
		},
		"checksum flipped": func(t *testing.T, seg string, r walRecord) {
			flipByte(t, seg, r.off+5)
		},
		"second half zeros": func(t *testing.T, seg string, r walRecord) {
			half := r.length / 2
			patchFile(t, seg, int64(r.off+8+half), make([]byte, r.length-half))
		},
		"file cut in the record": func(t *testing.T, seg string, r walRecord) {
			require.NoError(t, os.Truncate(seg, int64(r.off+8+r.length/2)))
		},
		"file cut in the record head": func(t *testing.T, seg string, r walRecord) {
			require.NoError(t, os.Truncate(seg, int64(r.off+3)))
		},
		"length too large": func(t *testing.T, seg string, r walRecord) {
			patchFile(t, seg, int64(r.off), []byte{0x7f, 0xff, 0xff, 0xff})
		},
		"length one too long": func(t *testing.T, seg string, r walRecord) {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(r.length+1))
			patchFile(t, seg, int64(r.off), b[:])
		},
	}
	for name, tear := range tears {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, db := walDataFile(t)
			e := openWAL(t, dir, 4<<10)
			m, roots := model{}, []string{}
			workload(t, e, m, &roots, 0, 60)
			before := m.clone()
			// The last transaction: a put, a delete and a new bucket.
			require.NoError(t, e.Update(func(tx kv.Tx) error {
				b := tx.Bucket([]byte("r0"))
				if err := b.Put([]byte("torn"), []byte("never acknowledged")); err != nil {
					return err
				}
				if err := b.Delete([]byte("k001")); err != nil {
					return err
				}
				_, err := b.CreateBucket([]byte("torn-bucket"))
				return err
			}))
			crashWAL(t, e)
			segs := walSegs(t, db)
			seg := segs[len(segs)-1]
			recs := walRecords(t, seg)
			require.GreaterOrEqual(t, len(recs), 2)
			tear(t, seg, recs[len(recs)-1])

			e = openWAL(t, dir, 4<<10)
			requireContent(t, e, roots, before)
			require.Len(t, walSegs(t, db), 1)
			workload(t, e, before, &roots, 60, 10)
			crashWAL(t, e)
			e = openWAL(t, dir, 4<<10)
			requireContent(t, e, roots, before)
			require.NoError(t, e.Close())
		})
	}
}

// A segment whose creation was cut short (a file with no header yet, or a partial header
// and zeros) is the last one: it held nothing, and the segments before it are replayed.
func TestWALHeaderlessLastSegmentIsIgnored(t *testing.T) {
	t.Parallel()
	for name, content := range map[string][]byte{
		"empty":                  {},
		"short":                  []byte("DWAL00"),
		"zeros":                  make([]byte, 4096),
		"partial header + zeros": append([]byte("DWAL0001\x01\x02\x03"), make([]byte, 4096)...),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, db := walDataFile(t)
			e := openWAL(t, dir, 1<<20)
			m, roots := model{}, []string{}
			workload(t, e, m, &roots, 0, 20)
			crashWAL(t, e)
			segs := walSegs(t, db)
			next := fmt.Sprintf("%s-wal.%016x", db, segNumber(t, segs[len(segs)-1])+1)
			writeFile(t, next, content)
			e = openWAL(t, dir, 1<<20)
			requireContent(t, e, roots, m)
			after := walSegs(t, db)
			require.Len(t, after, 1)
			require.Greater(t, segNumber(t, after[0]), segNumber(t, next))
			require.NoError(t, e.Close())
		})
	}
}

// --- 3 and 5. two segments: a crash inside a checkpoint ----------------------------------

// twoSegments leaves in dir the files of a process killed in the middle of a checkpoint:
// segment 1 frozen and not yet in bbolt, segment 2 (which applies on the checkpoint's
// transaction) holding the transactions since. It returns the expected content.
func twoSegments(t *testing.T, dir string) (model, []string) {
	t.Helper()
	db := filepath.Join(dir, "kv.db")
	e := openWAL(t, dir, 1<<30)
	m, roots := model{}, []string{}
	workload(t, e, m, &roots, 0, 50)
	data := readFile(t, db) // bbolt before the checkpoint (only checkpoints write it)
	segs := walSegs(t, db)
	require.Len(t, segs, 1)
	seg1 := readFile(t, segs[0])
	forceCheckpoint(t, e)
	workload(t, e, m, &roots, 50, 50)
	crashWAL(t, e)
	require.Len(t, walSegs(t, db), 1)
	writeFile(t, db, data)
	writeFile(t, segs[0], seg1)
	require.Len(t, walSegs(t, db), 2)
	return m, roots
}

// A crash during a checkpoint, before bbolt committed it: both segments are replayed,
// in order.
func TestWALCrashDuringCheckpointReplaysBothSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m, roots := twoSegments(t, dir)
	e := openWAL(t, dir, 1<<30)
	requireContent(t, e, roots, m)
	require.Len(t, walSegs(t, filepath.Join(dir, "kv.db")), 1)
	require.NoError(t, e.Close())
}

// Damage anywhere but at the tail of the last segment is not a torn commit: the log
// (acknowledged transactions) is damaged. Open refuses with ErrCorrupt and leaves the
// data file and the log as they were.
func TestWALDamagedLogIsRefused(t *testing.T) {
	t.Parallel()
	damages := map[string]func(t *testing.T, segs []string){
		"record of the first segment flipped": func(t *testing.T, segs []string) {
			r := walRecords(t, segs[0])[3]
			flipByte(t, segs[0], r.off+8+r.length/2)
		},
		"last record of the first segment flipped": func(t *testing.T, segs []string) {
			recs := walRecords(t, segs[0])
			r := recs[len(recs)-1]
			flipByte(t, segs[0], r.off+8+r.length-1)
		},
		"first segment cut short": func(t *testing.T, segs []string) {
			recs := walRecords(t, segs[0])
			r := recs[len(recs)-1]
			require.NoError(t, os.Truncate(segs[0], int64(r.off+8+r.length/2)))
		},
		"header of the first segment flipped": func(t *testing.T, segs []string) {
			flipByte(t, segs[0], 20) // in the epoch
		},
		"magic of the first segment flipped": func(t *testing.T, segs []string) {
			flipByte(t, segs[0], 0)
		},
		"header of the last segment flipped": func(t *testing.T, segs []string) {
			flipByte(t, segs[1], 28) // in the base txid
		},
		"header checksum of the last segment flipped": func(t *testing.T, segs []string) {
			flipByte(t, segs[1], 33)
		},
		"header of the last segment zeroed, records after it": func(t *testing.T, segs []string) {
			patchFile(t, segs[1], 0, make([]byte, walHeader))
		},
		"first segment headerless": func(t *testing.T, segs []string) {
			writeFile(t, segs[0], make([]byte, 4096))
		},
		"a headerless segment between two": func(t *testing.T, segs []string) {
			// Renumber segment 2 as 3, leaving an empty 2.
			data := readFile(t, segs[1])
			n := segNumber(t, segs[1])
			writeFile(t, segs[1], nil)
			next := segs[1][:len(segs[1])-16] + fmt.Sprintf("%016x", n+1)
			writeFile(t, next, data)
		},
		"a record of the first segment malformed, with a valid checksum": func(t *testing.T, segs []string) {
			// A payload the replayer cannot decode: an unknown operation.
			r := walRecords(t, segs[0])[0]
			data := readFile(t, segs[0])
			data[r.off+8] = 'Z'
			binary.BigEndian.PutUint32(data[r.off+4:], recordCRC(segNumber(t, segs[0]), data[r.off+8:r.off+8+r.length]))
			writeFile(t, segs[0], data)
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, db := walDataFile(t)
			twoSegments(t, dir)
			segs := walSegs(t, db)
			damage(t, segs)
			data := readFile(t, db)
			segs = walSegs(t, db)
			logs := map[string][]byte{}
			for _, s := range segs {
				logs[s] = readFile(t, s)
			}

			_, err := walkv.OpenForTest(dir, 1<<30)
			require.ErrorIs(t, err, kv.ErrCorrupt)
			require.Equal(t, data, readFile(t, db), "the data file is left as it was")
			require.Equal(t, segs, walSegs(t, db), "the log is left as it was")
			for s, b := range logs {
				require.Equal(t, b, readFile(t, s))
			}
		})
	}
}

// recordCRC is a record's checksum as storage/internal/wal computes it (crc32c of the segment's
// number, then the payload).
func recordCRC(seg uint64, payload []byte) uint32 {
	tab := crc32.MakeTable(crc32.Castagnoli)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seg)
	return crc32.Update(crc32.Checksum(n[:], tab), tab, payload)
}

// A segment whose checkpoint committed in bbolt but whose file outlived it (a crash
// between the two) is skipped: applying it again would undo what later segments changed.
func TestWALCheckpointedSegmentIsSkipped(t *testing.T) {
	t.Parallel()
	dir, db := walDataFile(t)
	e := openWAL(t, dir, 1<<30)
	put := func(k, v string) {
		require.NoError(t, e.Update(func(tx kv.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("r"))
			if err != nil {
				return err
			}
			return b.Put([]byte(k), []byte(v))
		}))
	}
	put("k", "1")
	put("gone", "x")
	segs := walSegs(t, db)
	require.Len(t, segs, 1)
	stale := readFile(t, segs[0])
	forceCheckpoint(t, e) // segment 1 into bbolt, its file deleted
	put("k", "2")
	require.NoError(t, e.Update(func(tx kv.Tx) error { return tx.Bucket([]byte("r")).Delete([]byte("gone")) }))
	forceCheckpoint(t, e) // segment 2 into bbolt
	put("other", "3")     // segment 3, in the log only
	crashWAL(t, e)
	writeFile(t, segs[0], stale)
	require.Len(t, walSegs(t, db), 2)

	e = openWAL(t, dir, 1<<30)
	requireContent(t, e, []string{"r"}, model{"r/": "", "r/k": "2", "r/other": "3"})
	require.Len(t, walSegs(t, db), 1)
	require.NoError(t, e.Close())

	// The same window at Close: its checkpoint committed, the file not deleted.
	e = openWAL(t, dir, 1<<30)
	put("k", "4")
	segs = walSegs(t, db)
	stale = readFile(t, segs[0])
	require.NoError(t, e.Close())
	writeFile(t, segs[0], stale)
	e = openWAL(t, dir, 1<<30)
	requireContent(t, e, []string{"r"}, model{"r/": "", "r/k": "4", "r/other": "3"})
	require.Len(t, walSegs(t, db), 1)
	require.NoError(t, e.Close())
}

// A crash after a replay committed in bbolt, before the replayed segments were deleted:
// the next open must not replay them again over the state that already holds them.
// With two segments (a crash inside a checkpoint), replaying both in one bbolt
// transaction left bbolt one txid short of the second segment's successor: the next
// open took it for not yet applied and replayed it again. Blind puts and deletes
// replayed twice end the same, but a key deleted and re-created as a bucket in that
// segment fails the second replay (bbolt: incompatible value), and the store no longer
// opened. Replay now commits one bbolt transaction per segment.
func TestWALCrashAfterReplayBeforeDelete(t *testing.T) {
	bothWays(t, "bucket-replacing-a-key", func(t *testing.T, conflict bool) {
		dir, db := walDataFile(t)
		e := openWAL(t, dir, 1<<30)
		m, roots := model{}, []string{}
		workload(t, e, m, &roots, 0, 20)
		data := readFile(t, db)
		seg1 := readFile(t, walSegs(t, db)[0])
		seg1Path := walSegs(t, db)[0]
		forceCheckpoint(t, e)
		workload(t, e, m, &roots, 20, 20)
		if conflict {
			require.NoError(t, e.Update(func(tx kv.Tx) error {
				b := tx.Bucket([]byte("r0"))
				if err := b.Put([]byte("x"), []byte("value")); err != nil {
					return err
				}
				if err := b.Delete([]byte("x")); err != nil {
					return err
				}
				_, err := b.CreateBucket([]byte("x"))
				return err
			}))
			m["r0/x/"] = ""
		}
		crashWAL(t, e)
		writeFile(t, db, data)
		writeFile(t, seg1Path, seg1)
		require.Len(t, walSegs(t, db), 2)

		require.NoError(t, walkv.ReplayOnlyForTest(db))
		require.Len(t, walSegs(t, db), 2)
		e, err := walkv.OpenForTest(dir, 1<<30)
		require.NoError(t, err)
		requireContent(t, e, roots, m)
		require.Len(t, walSegs(t, db), 1)
		require.NoError(t, e.Close())
	})
}

// --- 4. a log that is not this data file's ---------------------------------------------

// Segments of another data file (another epoch), copied next to this one, are refused:
// from a file with another history (other transaction ids), and from one with the same
// history, whose segments have the very base txids this file's log would have (the epoch
// alone tells them apart).
func TestWALForeignLogIsRefused(t *testing.T) {
	bothWays(t, "same-history", func(t *testing.T, sameHistory bool) {
		dirA, dbA := walDataFile(t)
		dirB, dbB := walDataFile(t)
		limit := int64(2 << 10)
		if sameHistory {
			limit = 1 << 30 // no checkpoints: both logs are one segment on the same txid
		}
		a := openWAL(t, dirA, limit)
		mA, rootsA := model{}, []string{}
		workload(t, a, mA, &rootsA, 0, 100)
		crashWAL(t, a)
		b := openWAL(t, dirB, limit)
		mB, rootsB := model{}, []string{}
		if sameHistory {
			workload(t, b, mB, &rootsB, 1000, 30)
			crashWAL(t, b)
			for _, s := range walSegs(t, dbB) {
				require.NoError(t, os.Remove(s))
			}
		} else {
			workload(t, b, mB, &rootsB, 0, 30)
			require.NoError(t, b.Close())
		}
		dataB := readFile(t, dbB)

		for _, s := range walSegs(t, dbA) {
			writeFile(t, filepath.Join(dirB, filepath.Base(s)), readFile(t, s))
		}
		require.NotEmpty(t, walSegs(t, dbB))
		_, err := walkv.OpenForTest(dirB, limit)
		require.ErrorIs(t, err, kv.ErrCorrupt)
		require.Equal(t, dataB, readFile(t, dbB))
		require.Len(t, walSegs(t, dbB), len(walSegs(t, dbA)), "the foreign log is left in place")

		// Moved away, the data file opens as it was; A's own log still recovers A.
		for _, s := range walSegs(t, dbB) {
			require.NoError(t, os.Remove(s))
		}
		b = openWAL(t, dirB, limit)
		if sameHistory {
			// B's own log was removed: B is empty, and has nothing of A.
			mB, rootsB = model{}, append(rootsB, rootsA...)
		}
		requireContent(t, b, rootsB, mB)
		require.NoError(t, b.Close())
		a = openWAL(t, dirA, limit)
		requireContent(t, a, rootsA, mA)
		require.NoError(t, a.Close())
	})
}

// A log whose data file is gone (deleted, or replaced by a new empty file) is refused:
// the new file has no epoch, or another one.
func TestWALLogWithoutItsDataFileIsRefused(t *testing.T) {
	t.Parallel()
	dir, db := walDataFile(t)
	e := openWAL(t, dir, 1<<20)
	m, roots := model{}, []string{}
	workload(t, e, m, &roots, 0, 20)
	crashWAL(t, e)
	require.NoError(t, os.Remove(db))
	_, err := walkv.OpenForTest(dir, 1<<20)
	require.ErrorIs(t, err, kv.ErrCorrupt)
	require.NotEmpty(t, walSegs(t, db))
}

// --- 6. a model ---------------------------------------------------------------------------

var (
	modelRoots = []string{"a", "b"}
	modelPaths = [][]string{{"a"}, {"b"}, {"a", "n"}, {"a", "n", "m"}}
)

// Random Updates (puts, deletes, cursor deletes, buckets; some rolled back), reads,
// checkpoints, crashes (some with a torn unacknowledged record at the log's tail), clean
// reopens: after every step the engine holds what an in-memory model says, seen through
// every way of reading (walks both ways, Seek, Get, ForEach), and each Update sees its own
// writes through the same reads before it commits.
func TestWALModel(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	var cases atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		dir := filepath.Join(base, strconv.FormatInt(cases.Add(1), 10))
		require.NoError(rt, os.Mkdir(dir, 0o700))
		db := filepath.Join(dir, "kv.db")
		limit := rapid.SampledFrom([]int64{300, 2 << 10, 1 << 20}).Draw(rt, "checkpointBytes")
		e, err := walkv.OpenForTest(dir, limit)
		require.NoError(rt, err)
		open := true
		defer func() {
			if open {
				_ = e.Close()
			}
		}()
		m := model{}
		steps := rapid.IntRange(1, 16).Draw(rt, "steps")
		for range steps {
			switch action := rapid.IntRange(0, 9).Draw(rt, "action"); {
			case action < 5:
				modelUpdate(rt, e, m)
			case action == 5:
				requireContent(rt, e, modelRoots, m)
			case action == 6:
				require.NoError(rt, e.(checkpointer).Checkpoint())
			case action == 7:
				require.NoError(rt, e.Close())
				open = false
				require.Empty(rt, walSegs(rt, db))
				e, err = walkv.OpenForTest(dir, limit)
				require.NoError(rt, err)
				open = true
			default:
				require.NoError(rt, walkv.CrashForTest(e))
				open = false
				if rapid.Bool().Draw(rt, "torn") {
					tearTail(rt, db, rapid.SliceOfN(rapid.Byte(), 1, 40).Draw(rt, "garbage"))
				}
				e, err = walkv.OpenForTest(dir, limit)
				require.NoError(rt, err)
				open = true
				require.Len(rt, walSegs(rt, db), 1)
			}
			requireContent(rt, e, modelRoots, m)
		}
	})
}

// tearTail writes the start of a record that was never finished after the last record of
// the log: a length and checksum, then part of the payload.
func tearTail(t *rapid.T, db string, garbage []byte) {
	segs := walSegs(t, db)
	seg := segs[len(segs)-1]
	off := walHeader
	if recs := walRecords(t, seg); len(recs) > 0 {
		r := recs[len(recs)-1]
		off = r.off + 8 + r.length
	}
	head := binary.BigEndian.AppendUint32(nil, uint32(len(garbage)+100))
	head = binary.BigEndian.AppendUint32(head, 0xdeadbeef)
	patchFile(t, seg, int64(off), append(head, garbage...))
}

func modelUpdate(t *rapid.T, e kv.Engine, m model) {
	rollback := rapid.IntRange(0, 5).Draw(t, "rollback") == 0
	nops := rapid.IntRange(1, 8).Draw(t, "ops")
	type op struct {
		kind int // 0 put, 1 delete, 2 delete every other value by cursor, 3 bucket only
		path []string
		key  string
		val  string
	}
	ops := make([]op, nops)
	for i := range ops {
		ops[i] = op{
			kind: rapid.IntRange(0, 6).Draw(t, "kind") % 4,
			path: rapid.SampledFrom(modelPaths).Draw(t, "bucket"),
			key:  fmt.Sprintf("k%d", rapid.IntRange(0, 9).Draw(t, "key")),
			val:  rapid.StringMatching(`[a-z]{1,12}`).Draw(t, "value"),
		}
	}
	commitModel(t, e, m, rollback, func(tx kv.Tx, pending model) error {
		for _, o := range ops {
			b, err := openPath(tx, o.path)
			if err != nil {
				return err
			}
			pending.ensure(o.path)
			switch o.kind {
			case 0:
				err = putTracked(b, pending, o.path, o.key, o.val)
			case 1:
				err = deleteTracked(b, pending, o.path, o.key)
			case 2:
				prefix := strings.Join(o.path, "/") + "/"
				c, i := b.Cursor(), 0
				for k, v := c.First(); k != nil && err == nil; k, v = c.Next() {
					if v == nil {
						continue
					}
					if i%2 == 0 {
						delete(pending, prefix+string(k))
						err = c.Delete()
					}
					i++
				}
			}
			if err != nil {
				return err
			}
		}
		require.Equal(t, map[string]string(pending), map[string]string(dump(t, tx, modelRoots)), "the transaction's own view")
		return nil
	})
}

// --- 7. concurrency ----------------------------------------------------------------------

// Views running alongside Updates and checkpoints (every 512 bytes of log, and forced)
// each see one committed state: Updates move amounts between two keys (the sum stays
// 1000), count themselves, and keep exactly the last three of their marker keys.
func TestWALConcurrentViewsSeeSnapshots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openWAL(t, dir, 512)
	defer func() { require.NoError(t, e.Close()) }()
	require.NoError(t, e.Update(func(tx kv.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("acct"))
		if err != nil {
			return err
		}
		if _, err := b.CreateBucket([]byte("marks")); err != nil {
			return err
		}
		if err := b.Put([]byte("x"), []byte("500")); err != nil {
			return err
		}
		if err := b.Put([]byte("y"), []byte("500")); err != nil {
			return err
		}
		return b.Put([]byte("n"), []byte("0"))
	}))
	forceCheckpoint(t, e)

	const updates = 200
	mark := func(i int) string { return fmt.Sprintf("m%06d", i) }
	check := func(tx kv.Tx) error {
		b := tx.Bucket([]byte("acct"))
		if b == nil || b.Bucket([]byte("marks")) == nil {
			return errors.New("a bucket is missing")
		}
		atoi := func(k string) int { n, _ := strconv.Atoi(string(b.Get([]byte(k)))); return n }
		if x, y := atoi("x"), atoi("y"); x+y != 1000 {
			return fmt.Errorf("x %d + y %d = %d", x, y, x+y)
		}
		// The same through a walk, backward.
		sum, c := 0, b.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if string(k) == "x" || string(k) == "y" {
				n, _ := strconv.Atoi(string(v))
				sum += n
			}
		}
		if sum != 1000 {
			return fmt.Errorf("walked sum %d", sum)
		}
		n := atoi("n")
		var want, got []string
		for i := max(0, n-3); i < n; i++ {
			want = append(want, mark(i))
		}
		mc := b.Bucket([]byte("marks")).Cursor()
		for k, _ := mc.First(); k != nil; k, _ = mc.Next() {
			got = append(got, string(k))
		}
		if !slices.Equal(want, got) {
			return fmt.Errorf("after %d updates the marks are %v", n, got)
		}
		return nil
	}

	var wg sync.WaitGroup
	var done atomic.Bool
	errs := make(chan error, 16)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for i := range updates {
			err := e.Update(func(tx kv.Tx) error {
				b := tx.Bucket([]byte("acct"))
				x, _ := strconv.Atoi(string(b.Get([]byte("x"))))
				y, _ := strconv.Atoi(string(b.Get([]byte("y"))))
				d := (i*37)%200 - 100
				if err := b.Put([]byte("x"), []byte(strconv.Itoa(x-d))); err != nil {
					return err
				}
				if err := b.Put([]byte("y"), []byte(strconv.Itoa(y+d))); err != nil {
					return err
				}
				if err := b.Put([]byte("n"), []byte(strconv.Itoa(i+1))); err != nil {
					return err
				}
				marks := b.Bucket([]byte("marks"))
				if err := marks.Put([]byte(mark(i)), []byte(strings.Repeat("p", 40))); err != nil {
					return err
				}
				if i >= 3 {
					return marks.Delete([]byte(mark(i - 3)))
				}
				return nil
			})
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			if err := e.(checkpointer).Checkpoint(); err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var views atomic.Int64
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				if err := e.View(check); err != nil {
					errs <- err
					return
				}
				views.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, e.View(check))
	require.NoError(t, e.View(func(tx kv.Tx) error {
		require.Equal(t, strconv.Itoa(updates), string(tx.Bucket([]byte("acct")).Get([]byte("n"))))
		return nil
	}))
	require.Positive(t, views.Load())
}

// A value deleted and a bucket created under its name in one overlay leave only the
// bucket's entry there, while bbolt still has the value: the checkpoint must replace
// the value, in a live checkpoint and after a crash's replay alike.
func TestWALBucketReplacingACheckpointedValue(t *testing.T) {
	bothWays(t, "crash", func(t *testing.T, crash bool) {
		dir := t.TempDir()
		e := openWAL(t, dir, 1<<30)
		require.NoError(t, e.Update(func(tx kv.Tx) error {
			b, err := openPath(tx, []string{"r"})
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		}))
		forceCheckpoint(t, e)
		require.NoError(t, e.Update(func(tx kv.Tx) error {
			b := tx.Bucket([]byte("r"))
			if err := b.Delete([]byte("k")); err != nil {
				return err
			}
			sub, err := b.CreateBucket([]byte("k"))
			if err != nil {
				return err
			}
			return sub.Put([]byte("x"), []byte("1"))
		}))
		want := model{"r/": "", "r/k/": "", "r/k/x": "1"}
		requireContent(t, e, []string{"r"}, want)
		if crash {
			crashWAL(t, e)
			e = openWAL(t, dir, 1<<30)
		} else {
			forceCheckpoint(t, e)
		}
		requireContent(t, e, []string{"r"}, want)
		require.NoError(t, e.Close())
		e = openWAL(t, dir, 1<<30)
		requireContent(t, e, []string{"r"}, want)
		require.NoError(t, e.Close())
	})
}

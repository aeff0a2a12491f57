package walkv_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage/internal/wal"
	"github.com/duraton/duraton/storage/internal/wal/waltest"
	"github.com/duraton/duraton/storage/internal/walkv"
	"github.com/duraton/duraton/storage/kv"
)

// The crash-point suite: a workload of commits runs on a filesystem that crashes after
// its call k (waltest: what was not synced is lost, the last unsynced write may be torn
// at any byte), or fails call k with ENOSPC or EIO and goes on, then crashes at the end.
// For every k the store reopens on what the disk kept and must hold every acknowledged
// commit byte for byte, and of the others only, whole, the one whose failure stopped the
// log. Before reopening, a byte flipped in a record of the last segment that is not its
// last record must make the open fail (damage is not a torn tail), changing nothing.
//
// By default a fixed sample of the call indices runs; DURATON_WAL_CRASH_FULL=1 runs
// every one.

const (
	crashCommitsN = 40
	crashLimit    = 4 << 10 // a new segment every few commits
	crashSeed     = 27
)

// crashRun is what the workload saw: the content after every acknowledged commit, and
// the content with the commit whose failure stopped the log too (nil if none did).
type crashRun struct {
	acked, doubt model
	calls        int
}

var crashRoots = []string{"a", "b"}

// crashCommit is commit i of the workload: puts and deletes in nested buckets, some of
// them new (a new bucket's definition goes into the log with its first record).
func crashCommit(i int) func(tx kv.Tx, pending model) error {
	return func(tx kv.Tx, pending model) error {
		paths := [][]string{{"a"}, {"a", fmt.Sprintf("s%d", i/3)}, {"b"}, {"b", fmt.Sprintf("t%d", i%4), fmt.Sprintf("u%d", i/5)}}
		for j := range 3 {
			path := paths[(i+j)%len(paths)]
			b, err := openPath(tx, path)
			if err != nil {
				return err
			}
			pending.ensure(path)
			k := fmt.Sprintf("k%02d", (i*7+j)%23)
			if (i+j)%4 == 0 {
				err = deleteTracked(b, pending, path, k)
			} else {
				r := rand.New(rand.NewPCG(uint64(i), uint64(j)))
				v := make([]byte, 16+(i*37+j*101)%500)
				for n := range v {
					v[n] = byte(r.IntN(256))
				}
				err = putTracked(b, pending, path, k, string(v))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// runCrashWorkload opens a log-backed engine in dir on fsys, commits the workload until
// the filesystem crashes, and leaves the engine as a killed process would.
func runCrashWorkload(t *testing.T, dir string, fsys *waltest.FS) crashRun {
	run := crashRun{acked: model{}}
	e, err := walkv.OpenOnFSForTest(dir, crashLimit, fsys)
	if err != nil {
		return run // the crash or fault came during the open: nothing was acknowledged
	}
	for i := range crashCommitsN {
		if fsys.Crashed() {
			break
		}
		pending := run.acked.clone()
		err := e.Update(func(tx kv.Tx) error { return crashCommit(i)(tx, pending) })
		switch {
		case err == nil:
			run.acked = pending
		case errors.Is(err, walkv.ErrFailed) && run.doubt == nil:
			run.doubt = pending // the failure that stopped the log: it may be there, whole
		}
		walkv.WaitCheckpointForTest(e)
	}
	run.calls = fsys.Calls()
	_ = walkv.CrashForTest(e) // closing the files fails on a crashed filesystem
	return run
}

// tearer picks how much of the last unsynced write reaches the disk: none, all, or any
// byte count in between.
func tearer(r *rand.Rand) func(n int) int {
	return func(n int) int {
		switch r.IntN(3) {
		case 0:
			return 0
		case 1:
			return n
		default:
			return r.IntN(n + 1)
		}
	}
}

// checkCrashPoint reopens what the crash left in dir and on disk and checks it against
// run; first, on a copy, that damage in the last segment is refused.
func checkCrashPoint(t *testing.T, dir string, disk *waltest.FS, run crashRun, r *rand.Rand) {
	db := filepath.Join(dir, "kv.db")
	requireDamageRefused(t, dir, disk.AfterCrash(func(int) int { return 0 }), r)

	e, err := walkv.OpenOnFSForTest(dir, crashLimit, disk)
	require.NoError(t, err, "reopen after the crash")
	var got model
	require.NoError(t, e.View(func(tx kv.Tx) error {
		got = dump(t, tx, crashRoots)
		return nil
	}))
	if run.doubt == nil || !maps.Equal(got, run.doubt) {
		require.Equal(t, map[string]string(run.acked), map[string]string(got), "after the crash: every acknowledged commit, nothing else (%d calls)", run.calls)
	}
	// The store goes on: more commits, a clean close, and a reopen keep them.
	m := got.clone()
	for i := crashCommitsN; i < crashCommitsN+5; i++ {
		commitModel(t, e, m, false, crashCommit(i))
	}
	require.NoError(t, e.Close())
	require.Empty(t, walNames(disk, db), "a clean close leaves no log")
	e, err = walkv.OpenOnFSForTest(dir, crashLimit, disk)
	require.NoError(t, err)
	requireContent(t, e, crashRoots, m)
	require.NoError(t, e.Close())
}

// requireDamageRefused flips a payload byte of a record of the last segment that is
// not its last one (acknowledged, since the record after it was written): opening must
// fail with ErrCorrupt naming the file and offset, and leave the log and bbolt as they
// were.
func requireDamageRefused(t *testing.T, dir string, disk *waltest.FS, r *rand.Rand) {
	db := filepath.Join(dir, "kv.db")
	names := walNames(disk, db)
	if len(names) == 0 {
		return
	}
	last := names[len(names)-1]
	var n uint64
	_, err := fmt.Sscanf(last[len(last)-16:], "%x", &n)
	require.NoError(t, err)
	c, err := wal.Read(disk, db, n, true)
	if err != nil || len(c.Records) < 2 {
		return
	}
	rec := c.Records[r.IntN(len(c.Records)-1)]
	off := rec.Offset + wal.RecordHead + int64(r.IntN(len(rec.Payload)))
	disk.Patch(last, off, []byte{rec.Payload[off-rec.Offset-wal.RecordHead] ^ 0x5a})
	before, dbBefore := disk.Snapshot(), sumOf(t, db)

	e, err := walkv.OpenOnFSForTest(dir, crashLimit, disk)
	if err == nil {
		_ = walkv.CrashForTest(e)
	}
	require.ErrorIs(t, err, kv.ErrCorrupt, "a record of %s damaged at %d, valid records after it: opened as if torn", last, off)
	require.ErrorContains(t, err, last)
	require.ErrorContains(t, err, fmt.Sprintf("offset %d", rec.Offset))
	require.Equal(t, before, disk.Snapshot(), "a refused open changed the log")
	require.Equal(t, dbBefore, sumOf(t, db), "a refused open changed the data file")
}

func walNames(disk *waltest.FS, db string) []string {
	var out []string
	for name := range disk.Snapshot() {
		if strings.HasPrefix(name, db+"-wal.") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func sumOf(t *testing.T, path string) [32]byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// crashPoints is which call indices of a workload making total calls to test: all of
// them with DURATON_WAL_CRASH_FULL=1, else a fixed sample.
func crashPoints(total, sample int, seed uint64) []int {
	all := make([]int, total)
	for i := range all {
		all[i] = i + 1
	}
	if os.Getenv("DURATON_WAL_CRASH_FULL") != "" || total <= sample {
		return all
	}
	r := rand.New(rand.NewPCG(crashSeed, seed))
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	out := all[:sample]
	slices.Sort(out)
	return out
}

// workloadCalls is how many filesystem calls the workload makes without faults.
func workloadCalls(t *testing.T) int {
	fsys := waltest.New()
	run := runCrashWorkload(t, t.TempDir(), fsys)
	require.Nil(t, run.doubt)
	require.NotEmpty(t, run.acked)
	return run.calls
}

func TestWALCrashPoints(t *testing.T) {
	t.Parallel()
	total := workloadCalls(t)
	for _, k := range crashPoints(total, 100, 1) {
		t.Run(fmt.Sprintf("crash-after-%d", k), func(t *testing.T) {
			r := rand.New(rand.NewPCG(crashSeed, uint64(k)))
			dir := t.TempDir()
			fsys := waltest.New()
			fsys.CrashAfter(k)
			run := runCrashWorkload(t, dir, fsys)
			checkCrashPoint(t, dir, fsys.AfterCrash(tearer(r)), run, r)
		})
	}
}

func TestWALFaultPoints(t *testing.T) {
	t.Parallel()
	total := workloadCalls(t)
	for _, fault := range []error{waltest.ENOSPC, waltest.EIO} {
		for _, k := range crashPoints(total, 60, 2) {
			t.Run(fmt.Sprintf("%v-at-%d", fault, k), func(t *testing.T) {
				r := rand.New(rand.NewPCG(crashSeed, uint64(k)))
				dir := t.TempDir()
				fsys := waltest.New()
				fsys.FailAt(k, fault)
				// A few more commits after the fault, then the crash: before the
				// segment the fault hit is checkpointed, or after.
				fsys.CrashAfter(k + 1 + r.IntN(30))
				run := runCrashWorkload(t, dir, fsys)
				checkCrashPoint(t, dir, fsys.AfterCrash(tearer(r)), run, r)
			})
		}
	}
}

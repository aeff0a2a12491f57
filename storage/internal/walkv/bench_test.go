package walkv

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"

	"github.com/duraton/duraton/storage/kv"
	bolt "go.etcd.io/bbolt"
)

// BenchmarkWALTx is the write-ahead-logged engine's own CPU in a write transaction
// shaped like a workflow step's (12 puts, 6 gets, 2 deletes over three buckets), on an
// overlay already holding ~30,000 entries and a bbolt file holding as many: the clone,
// the copy-on-write of the overlay's nodes, the lookups through three layers. The
// transaction is rolled back, so no log write or fsync is measured.
func BenchmarkWALTx(b *testing.B) {
	step := walStepTx(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		step(i)
	}
}

// TestWALTxAllocBudget keeps BenchmarkWALTx's transaction within its allocations
// (~235 now: the copied nodes, one buffer per put and per delete, the clone).
func TestWALTxAllocBudget(t *testing.T) {
	step := walStepTx(t)
	i := 0
	allocs := testing.AllocsPerRun(200, func() { step(i); i++ })
	if allocs > 300 {
		t.Fatalf("a step-shaped WAL transaction made %.0f allocations, budget 300", allocs)
	}
}

// walStepTx fills an engine and returns BenchmarkWALTx's transaction: step i puts new
// keys and reads and deletes keys of both layers.
func walStepTx(b testing.TB) func(i int) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	e, err := Open(db, Config{CheckpointBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	names := [][]byte{[]byte("runs"), []byte("due"), []byte("steps")}
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("k"), uint64(i)*2654435761%1_000_003) }
	val := make([]byte, 300)
	fill := func(from, to int) {
		for i := from; i < to; i += 500 {
			err := e.Update(func(tx kv.Tx) error {
				root, err := tx.CreateBucketIfNotExists([]byte("p"))
				if err != nil {
					return err
				}
				for _, n := range names {
					bk, err := root.CreateBucketIfNotExists(n)
					if err != nil {
						return err
					}
					for j := i; j < min(i+500, to); j++ {
						if err := bk.Put(key(j), val); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	fill(0, 10_000)
	if err := e.Checkpoint(); err != nil { // into bbolt
		b.Fatal(err)
	}
	fill(10_000, 20_000) // in the overlay
	rollback := errors.New("rollback")
	return func(i int) {
		err := e.Update(func(tx kv.Tx) error {
			root := tx.Bucket([]byte("p"))
			for _, n := range names {
				bk := root.Bucket(n)
				for j := range 4 {
					if err := bk.Put(key(30_000+i*4+j), val); err != nil {
						return err
					}
				}
				_ = bk.Get(key(i % 10_000))
				_ = bk.Get(key(10_000 + i%10_000))
			}
			if err := root.Bucket(names[1]).Delete(key(i % 20_000)); err != nil {
				return err
			}
			if err := root.Bucket(names[1]).Delete(key(30_000 + i*4)); err != nil {
				return err
			}
			return rollback
		})
		if !errors.Is(err, rollback) {
			b.Fatal(err)
		}
	}
}

package storagetest

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/duraton/duraton/storage/kv"
	"github.com/stretchr/testify/require"
)

// A model check of the engine seam: random puts, deletes, reads and cursor moves in
// buckets large enough that an engine reading in pages crosses page boundaries, each
// result compared with a sorted in-memory model, some transactions rolled back. The seed
// is fixed: a failure replays.

// kvModel is a bucket's expected content.
type kvModel map[string][]byte

func (m kvModel) sorted() []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (m kvModel) clone() kvModel {
	out := make(kvModel, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// modelKey is one of about 4000 keys: a 2-byte number, sometimes with a suffix byte
// that sorts it among its neighbours (NUL, a high byte).
func modelKey(r *rand.Rand) []byte {
	k := binary.BigEndian.AppendUint16(nil, uint16(r.IntN(1500)))
	switch r.IntN(4) {
	case 0:
		k = append(k, 0x00)
	case 1:
		k = append(k, 0xff)
	}
	return k
}

// checkContent walks the whole bucket both ways and compares it with the model.
func checkContent(t *testing.T, b kv.Bucket, m kvModel, what string) {
	t.Helper()
	want := m.sorted()
	var got []string
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		require.Equal(t, m[string(k)], v, "%s: value of %x", what, k)
		got = append(got, string(k))
	}
	require.Equal(t, want, got, "%s: forward walk", what)
	got = got[:0]
	for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
		got = append(got, string(k))
	}
	slices.Reverse(got)
	require.Equal(t, want, got, "%s: backward walk", what)
}

// runModelTx applies n random operations to b and m, checking each result.
func runModelTx(t *testing.T, r *rand.Rand, b kv.Bucket, m kvModel, n int) {
	t.Helper()
	keys := m.sorted()
	c := b.Cursor()
	pos := -1 // the cursor's index in keys; -1: not positioned (must seek before moving)
	land := func(k, v []byte, i int, what string) {
		t.Helper()
		if i < 0 || i >= len(keys) {
			require.Nil(t, k, "%s: past the end, got %x", what, k)
			pos = -1
			return
		}
		require.Equal(t, []byte(keys[i]), k, "%s", what)
		require.Equal(t, m[keys[i]], v, "%s: value of %x", what, k)
		pos = i
	}
	for op := range n {
		switch x := r.IntN(100); {
		case x < 20: // put (new or replaced), then the cursor must seek again
			k := modelKey(r)
			v := binary.BigEndian.AppendUint32(bytes.Repeat([]byte{byte(op)}, r.IntN(40)), uint32(op))
			require.NoError(t, b.Put(k, v))
			m[string(k)] = v
			keys, pos = m.sorted(), -1
		case x < 30: // delete, present or not
			k := modelKey(r)
			if len(keys) > 0 && r.IntN(2) == 0 {
				k = []byte(keys[r.IntN(len(keys))])
			}
			require.NoError(t, b.Delete(k))
			delete(m, string(k))
			keys, pos = m.sorted(), -1
		case x < 38:
			k := modelKey(r)
			v := b.Get(k)
			if want, ok := m[string(k)]; ok {
				require.Equal(t, want, v, "Get %x", k)
			} else {
				require.Nil(t, v, "Get %x of a missing key", k)
			}
		case x < 43:
			k, v := c.First()
			land(k, v, 0, "First")
		case x < 48:
			k, v := c.Last()
			land(k, v, len(keys)-1, "Last")
		case x < 60:
			s := modelKey(r)
			k, v := c.Seek(s)
			i, _ := slices.BinarySearch(keys, string(s))
			land(k, v, i, "Seek")
		case x < 90: // a run of moves one way, across pages
			if pos < 0 {
				continue
			}
			forward := r.IntN(2) == 0
			for range r.IntN(700) + 1 {
				if forward {
					k, v := c.Next()
					land(k, v, pos+1, "Next")
				} else {
					k, v := c.Prev()
					land(k, v, pos-1, "Prev")
				}
				if pos < 0 {
					break
				}
			}
		case x < 97: // delete under the cursor, then seek again
			if pos < 0 {
				continue
			}
			require.NoError(t, c.Delete())
			delete(m, keys[pos])
			keys, pos = m.sorted(), -1
		default:
			require.Equal(t, len(m), b.KeyCount(), "KeyCount")
		}
	}
}

// modelCheck fills a bucket, then runs rounds of random operations, every third round
// rolled back, checking the content inside each transaction and in the next.
func modelCheck(t *testing.T, e kv.Engine) {
	r := rand.New(rand.NewPCG(16, 2026))
	m := kvModel{}
	kvUpdate(t, e, "rundata", func(b kv.Bucket) error {
		for range 1200 {
			k := modelKey(r)
			m[string(k)] = append([]byte("v"), k...)
			if err := b.Put(k, m[string(k)]); err != nil {
				return err
			}
		}
		return nil
	})
	kvView(t, e, "rundata", func(b kv.Bucket) error { checkContent(t, b, m, "after the fill"); return nil })
	for round := range 12 {
		rollback := round%3 == 2
		work := m.clone()
		err := kvTry(e, "rundata", func(b kv.Bucket) error {
			runModelTx(t, r, b, work, 300)
			checkContent(t, b, work, "inside the transaction")
			if rollback {
				return errRollback
			}
			return nil
		})
		if rollback {
			require.ErrorIs(t, err, errRollback)
		} else {
			require.NoError(t, err)
			m = work
		}
		kvView(t, e, "rundata", func(b kv.Bucket) error {
			checkContent(t, b, m, "in a later transaction")
			require.Equal(t, len(m), b.KeyCount())
			return nil
		})
	}
}

package delivery

import (
	"net/http"

	"github.com/duraton/duraton/sdk/wire"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// historyStore is a store with one project and a run history of the given bodies; odd
// message ids need JSON escaping.
func historyStore(t testing.TB, bodies [][]byte, odd bool) *storage.Store {
	store, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	_, err = EnsureProject(t.Context(), store, Project{ID: testProject, CurrentSigningKey: testKey, NextSigningKey: testNextKey}, "h")
	require.NoError(t, err)
	require.NoError(t, store.Update(func(tx *storage.Tx) error {
		for i, b := range bodies {
			ct := CallStep
			if i%3 == 2 {
				ct = CallFromCallback
			}
			id := "msg_2hbE4v0kq9Qw3v8mYc1Xx7a" + string(rune('a'+i))
			if odd {
				id += "\"\\é\u2028\x01"
			}
			if err := tx.PutHistory(testProject, "wfr_1", i, &HistoryEntry{MessageID: id, Body: b, CallType: ct, CreatedAt: int64(i)}); err != nil {
				return err
			}
		}
		return nil
	}))
	return store
}

// TestHistoryBodyTxMatchesHistoryBody: the body built from the stored records is byte
// for byte the one built from decoded entries, for every prefix, with empty, JSON and
// binary bodies and ids that need escaping.
func TestHistoryBodyTxMatchesHistoryBody(t *testing.T) {
	bodies := [][]byte{[]byte(`"payload"`), nil, {}, []byte(`{"stepId":1,"out":"<&>"}`), {0, 1, 2, 255, 254}, []byte("x")}
	store := historyStore(t, bodies, true)
	require.NoError(t, store.View(func(tx *storage.Tx) error {
		for n := 1; n <= len(bodies)+1; n++ {
			h, err := tx.History(testProject, "wfr_1", n)
			require.NoError(t, err)
			got, err := historyBodyTx(tx, testProject, "wfr_1", n)
			require.NoError(t, err)
			require.Equal(t, string(historyBody(h)), string(got), "prefix %d", n)
		}
		_, err := historyBodyTx(tx, "nope", "wfr_1", 1)
		require.ErrorIs(t, err, storage.ErrNotFound)
		return nil
	}))
}

// BenchmarkHistoryBody compares reading a 6-entry history into a delivery body through
// decoded entries and straight from the records.
func BenchmarkHistoryBody(b *testing.B) {
	bodies := [][]byte{[]byte(`"{}"`)}
	for range 5 {
		bodies = append(bodies, []byte(`{"stepId":1,"stepName":"s1","stepType":"Run","out":"1","concurrent":1}`))
	}
	store := historyStore(b, bodies, false)
	b.Run("Decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = store.View(func(tx *storage.Tx) error {
				h, err := tx.History(testProject, "wfr_1", 6)
				_ = historyBody(h)
				return err
			})
		}
	})
	b.Run("Direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = store.View(func(tx *storage.Tx) error {
				_, err := historyBodyTx(tx, testProject, "wfr_1", 6)
				return err
			})
		}
	})
}

// TestHistoryBodyAllocationBudget: building a delivery body allocates its buffer and
// bbolt's bucket and cursor handles, nothing per entry (decoding the entries took
// about 7 per entry).
func TestHistoryBodyAllocationBudget(t *testing.T) {
	bodies := make([][]byte, 20)
	for i := range bodies {
		bodies[i] = []byte(`{"stepId":1,"out":"1"}`)
	}
	store := historyStore(t, bodies, false)
	require.NoError(t, store.View(func(tx *storage.Tx) error {
		allocs := testing.AllocsPerRun(50, func() { _, _ = historyBodyTx(tx, testProject, "wfr_1", 20) })
		require.LessOrEqual(t, allocs, 12.0)
		return nil
	}))
}

// TestSentHeaderNamesAreCanonical: send sets these names into the header map directly,
// which is only right if they are in canonical form.
func TestSentHeaderNamesAreCanonical(t *testing.T) {
	for _, name := range []string{wire.HeaderSignature, wire.HeaderMessageID, wire.HeaderRetried, wire.HeaderUserAgent,
		wire.HeaderHops, wire.HeaderFlowControlKey, wire.HeaderFlowControlValue, wire.HeaderInline} {
		require.Equal(t, http.CanonicalHeaderKey(name), name)
	}
}

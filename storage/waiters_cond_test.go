package storage

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConditionalWaiters: match waiters are found by their value alone (an event reads
// none of the other values' waiters), if waiters by a scan of small records, plain
// waiters stay what Waiters lists; deleting or replacing a waiter removes its index
// entries and the path count.
func TestConditionalWaiters(t *testing.T) {
	s := openTestStore(t)
	const n = 2000
	require.NoError(t, s.Update(func(tx *Tx) error {
		for i := range n {
			w := &Waiter{EventID: "pay", RunID: fmt.Sprintf("r%04d", i), If: "async.data.id == event.data.id",
				Match: &WaitMatch{Path: "data.id", Value: fmt.Sprintf(`"o%d"`, i%1000)}}
			if err := tx.PutWaiter("p", w); err != nil {
				return err
			}
		}
		if err := tx.PutWaiter("p", &Waiter{EventID: "pay", RunID: "rif", If: "async.data.n > 1", Event: []byte(`{"data":{}}`)}); err != nil {
			return err
		}
		return tx.PutWaiter("p", &Waiter{EventID: "pay", RunID: "rplain"})
	}))
	require.NoError(t, s.View(func(tx *Tx) error {
		paths, err := tx.MatchPaths("p", "pay")
		require.NoError(t, err)
		require.Equal(t, []string{"data.id"}, paths)
		ws, err := tx.MatchWaiters("p", "pay", "data.id", `"o7"`, 10)
		require.NoError(t, err)
		require.Len(t, ws, 2)
		require.Equal(t, []string{"r0007", "r1007"}, []string{ws[0].RunID, ws[1].RunID})
		var ifs []IfWaiter
		require.NoError(t, tx.IfWaiters("p", "pay", func(w *IfWaiter) bool {
			ifs = append(ifs, IfWaiter{RunID: w.RunID, If: w.If, Event: append([]byte(nil), w.Event...)})
			return true
		}))
		require.Equal(t, []IfWaiter{{RunID: "rif", If: "async.data.n > 1", Event: []byte(`{"data":{}}`)}}, ifs)
		plain, err := tx.Waiters("p", "pay", 10, 0)
		require.NoError(t, err)
		require.Len(t, plain, 1)
		all, err := tx.AllWaiters("p", "pay", 5000, 0)
		require.NoError(t, err)
		require.Len(t, all, n+2)
		w, err := tx.Waiter("p", "pay", "r0007")
		require.NoError(t, err)
		require.Equal(t, `"o7"`, w.Match.Value)
		return nil
	}))
	require.NoError(t, s.Update(func(tx *Tx) error {
		// Replaced by a plain wait, then every match waiter deleted.
		if err := tx.PutWaiter("p", &Waiter{EventID: "pay", RunID: "r0007"}); err != nil {
			return err
		}
		for i := range n {
			if err := tx.DeleteWaiter("p", "pay", fmt.Sprintf("r%04d", i)); err != nil {
				return err
			}
		}
		return tx.DeleteWaiter("p", "pay", "rif")
	}))
	require.NoError(t, s.View(func(tx *Tx) error {
		paths, err := tx.MatchPaths("p", "pay")
		require.NoError(t, err)
		require.Empty(t, paths)
		ws, err := tx.MatchWaiters("p", "pay", "data.id", `"o7"`, 10)
		require.NoError(t, err)
		require.Empty(t, ws)
		all, err := tx.AllWaiters("p", "pay", 5000, 0)
		require.NoError(t, err)
		require.Len(t, all, 1)
		require.Equal(t, "rplain", all[0].RunID)
		return nil
	}))
}

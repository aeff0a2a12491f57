package storagetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// Listings and sweeps over more records than an engine reading in pages reads at once
// (storage/pg reads 16, then up to 512 rows a page), mixed with the transaction's own
// writes.

const largeN = 1300

var largeTests = map[string]func(*testing.T, *storage.Store){
	// The due index pages in order across engine pages, a scan stopped midway resumes
	// where it stopped, and moves made in the scanning transaction are seen.
	"DueIndex": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		entries := make([]storage.DueEntry, largeN)
		for i := range entries {
			entries[i] = storage.DueEntry{DueAt: base.Add(time.Duration((i*7919)%largeN) * time.Millisecond).UnixNano(), MessageID: ids.New(storage.PrefixMessage, base), Project: projectP}
		}
		want := putDue(t, s, entries)
		for _, size := range []int{700, 1000, largeN + 1} {
			require.Equal(t, want, scanAll(t, s, size), "page size %d", size)
		}
		// Move every other entry later while scanning: the scan that follows in the same
		// transaction sees exactly the new order.
		var got []storage.DueEntry
		update(t, s, func(tx *storage.Tx) error {
			got = got[:0]
			for i := 0; i < len(want); i += 2 {
				if err := tx.DeleteDue(want[i]); err != nil {
					return err
				}
				moved := want[i]
				moved.DueAt += int64(time.Hour)
				if err := tx.PutDue(moved); err != nil {
					return err
				}
			}
			return tx.ScanDue(nil, func(e storage.DueEntry) bool { got = append(got, e); return true })
		})
		var moved []storage.DueEntry
		for i, e := range want {
			if i%2 == 0 {
				e.DueAt += int64(time.Hour)
			}
			moved = append(moved, e)
		}
		sortDue(moved)
		require.Equal(t, moved, got)
		require.Equal(t, moved, scanAll(t, s, 500))
	},
	// Retention sweeps and a prefix removal over many records, in several calls.
	"Sweeps": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		made := logs(t, s, &ids, largeN, func(int) []byte { return nil })
		now := base.UnixMilli()
		update(t, s, func(tx *storage.Tx) error {
			for i := range largeN {
				if err := tx.PutDedup(projectP, fmt.Sprintf("d%05d", i), &storage.DedupRecord{ExpiresAt: now + int64(i%2)}); err != nil {
					return err
				}
				if err := tx.PutGate(projectP, fmt.Sprintf("wf\x00%05d", i), &storage.GateState{ExpiresAt: now + 1}); err != nil {
					return err
				}
			}
			return tx.PutGate(projectP, "wf2", &storage.GateState{ExpiresAt: now + 1})
		})
		cut := storage.IDAt(storage.PrefixLog, base.Add(1000*time.Second))
		var sweeps []int
		for range 3 {
			var n, d int
			update(t, s, func(tx *storage.Tx) (err error) {
				if n, err = tx.DeleteLogsBefore(projectP, cut, 600); err != nil {
					return err
				}
				d, err = tx.DeleteExpiredDedup(projectP, now+1, 600)
				return err
			})
			sweeps = append(sweeps, n, d)
		}
		require.Equal(t, []int{600, 600, 400, 50, 0, 0}, sweeps, "logs below the cut-off, then dedup records expired (every other one)")
		update(t, s, func(tx *storage.Tx) error { return tx.DeleteGatesWithPrefix(projectP, "wf\x00") })
		view(t, s, func(tx *storage.Tx) error {
			evs, _, err := tx.ListLogs(projectP, "", largeN, 0, all)
			require.NoError(t, err)
			require.Len(t, evs, largeN-1000)
			require.Equal(t, made[1000], evs[len(evs)-1].ID)
			var keys []string
			_, err = tx.ForEachGate(projectP, "", 10, func(k string, _ *storage.GateState) bool { keys = append(keys, k); return true })
			require.NoError(t, err)
			require.Equal(t, []string{"wf2"}, keys)
			return nil
		})
	},
	// A listing pages newest first across engine pages with a filter and a byte budget.
	"LogListing": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		made := logs(t, s, &ids, largeN, func(i int) []byte { return make([]byte, i%3*100) })
		var got []string
		before := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, largeN)
			var evs []storage.LogEvent
			var next string
			view(t, s, func(tx *storage.Tx) (err error) {
				evs, next, err = tx.ListLogs(projectP, before, 1000, 40_000, func(ev *storage.LogEvent) bool { return len(ev.ResponseBody) != 100 })
				return err
			})
			got = append(got, logIDs(evs)...)
			if next == "" {
				break
			}
			before = next
		}
		var want []string
		for i := largeN - 1; i >= 0; i-- {
			if i%3 != 1 {
				want = append(want, made[i])
			}
		}
		require.Equal(t, want, got)
	},
}

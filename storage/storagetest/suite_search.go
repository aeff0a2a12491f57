package storagetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// searchTests: the run search index (storage/runsearch.go) walks one term's entries
// newest first within the time bounds, checks the other terms, and pages with a cursor.
var searchTests = map[string]func(*testing.T, *storage.Store){
	"TermsTimeAndCursor": func(t *testing.T, s *storage.Store) {
		update(t, s, func(tx *storage.Tx) error {
			for i := range 60 {
				r := &storage.Run{ID: fmt.Sprintf("wfr_%02d", i), URL: "http://x/wf", CreatedAt: base.UnixMilli() + int64(i), State: storage.RunStarted,
					Workflow: []string{"wa", "wb"}[i%2], App: "app", EventName: []string{"e.x", "e.y", "e.z"}[i%3]}
				if i%5 == 0 {
					r.Labels = []string{"hot"}
				}
				if err := tx.IndexRun(projectP, r); err != nil {
					return err
				}
				if err := tx.PutRun(projectP, r); err != nil {
					return err
				}
			}
			// Another project's run of the same workflow is not found.
			other := &storage.Run{ID: "wfr_q", URL: "http://x/wf", CreatedAt: base.UnixMilli() + 30, State: storage.RunStarted, Workflow: "wb"}
			if err := tx.IndexRun(projectQ, other); err != nil {
				return err
			}
			return tx.PutRun(projectQ, other)
		})
		search := func(q storage.RunQuery, page int) []string {
			var ids []string
			var after *storage.RunCursor
			for range 100 {
				var runs []storage.Run
				var next *storage.RunCursor
				require.NoError(t, s.View(func(tx *storage.Tx) (err error) {
					runs, next, err = tx.SearchRuns(projectP, q, after, page, 0, nil)
					return err
				}))
				for _, r := range runs {
					ids = append(ids, r.ID)
				}
				if next == nil {
					return ids
				}
				after = next
			}
			t.Fatal("the cursor does not advance")
			return nil
		}
		want := func(lo, hi int, f func(int) bool) []string {
			out := []string{}
			for i := hi; i >= lo; i-- {
				if f(i) {
					out = append(out, fmt.Sprintf("wfr_%02d", i))
				}
			}
			return out
		}
		at := func(i int) int64 { return base.UnixMilli() + int64(i) }
		require.Equal(t, want(0, 59, func(i int) bool { return i%2 == 1 }), append([]string{}, search(storage.RunQuery{Workflow: "wb"}, 4)...))
		require.Equal(t, want(10, 40, func(i int) bool { return i%2 == 0 && i%3 == 0 }),
			append([]string{}, search(storage.RunQuery{Workflow: "wa", EventName: "e.x", From: at(10), To: at(40)}, 3)...))
		require.Equal(t, want(0, 59, func(i int) bool { return i%5 == 0 }), append([]string{}, search(storage.RunQuery{Label: "hot", App: "app"}, 5)...))
		require.Equal(t, want(5, 9, func(int) bool { return true }), append([]string{}, search(storage.RunQuery{From: at(5), To: at(9)}, 2)...))
		require.Empty(t, search(storage.RunQuery{Workflow: "none"}, 5))

		// A deleted run leaves the index.
		update(t, s, func(tx *storage.Tx) error {
			r, err := tx.Run(projectP, "wfr_59")
			if err != nil {
				return err
			}
			r.State, r.EndedAt = storage.RunSuccess, base.UnixMilli()+100
			return tx.DeleteRun(projectP, r)
		})
		require.Equal(t, want(0, 58, func(i int) bool { return i%2 == 1 }), append([]string{}, search(storage.RunQuery{Workflow: "wb"}, 7)...))
	},
}

package storage

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// searchFixture writes 300 runs in project p, one per second from t0: workflow "wa" or
// "wb" alternately, event "e.x" for every third, label "hot" for every fifth. Runs with
// an odd index are stored as an earlier version did: no Workflow/App/EventName fields,
// the workflow in the header and the event name only in the initial payload.
func searchFixture(t *testing.T, s *Store) {
	t.Helper()
	require.NoError(t, s.Update(func(tx *Tx) error {
		for i := range 300 {
			r := &Run{ID: fmt.Sprintf("wfr_%03d", i), URL: "http://x/wf", CreatedAt: 1_000_000 + int64(i)*1000, State: RunStarted}
			wf, ev := "wa", "e.y"
			if i%2 == 1 {
				wf = "wb"
			}
			if i%3 == 0 {
				ev = "e.x"
			}
			if i%5 == 0 {
				r.Labels = []string{"hot"}
			}
			if i%2 == 0 {
				r.Workflow, r.App, r.EventName = wf, "app1", ev
			} else {
				r.Header = map[string][]string{LegacyWorkflowHeader: {wf}, LegacyAppHeader: {"app1"}}
			}
			body := fmt.Appendf(nil, `{"id":"evt_%d","name":%q,"data":{"n":%d}}`, i, ev, i)
			if err := tx.PutHistory("p", r.ID, 0, &HistoryEntry{MessageID: "m", Body: body, CallType: CallStep}); err != nil {
				return err
			}
			if err := tx.IndexRun("p", r); err != nil {
				return err
			}
			if err := tx.PutRun("p", r); err != nil {
				return err
			}
		}
		return nil
	}))
}

// searchAll pages through a search and returns the run ids in order.
func searchAll(t *testing.T, s *Store, q RunQuery, page, examine int, keep RunSearchKeep) ([]string, int) {
	t.Helper()
	var ids []string
	var after *RunCursor
	pages := 0
	for {
		var runs []Run
		var next *RunCursor
		require.NoError(t, s.View(func(tx *Tx) (err error) {
			runs, next, err = tx.SearchRuns("p", q, after, page, examine, keep)
			return err
		}))
		pages++
		require.LessOrEqual(t, len(runs), page)
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if next == nil {
			return ids, pages
		}
		after = next
		require.Less(t, pages, 1000, "the cursor does not advance")
	}
}

// want lists the fixture's ids with index in [lo, hi] matching f, newest first.
func want(lo, hi int, f func(i int) bool) []string {
	var out []string
	for i := hi; i >= lo; i-- {
		if f(i) {
			out = append(out, fmt.Sprintf("wfr_%03d", i))
		}
	}
	return out
}

func TestSearchRunsByTermsAndTime(t *testing.T) {
	s := openTestStore(t)
	searchFixture(t, s)
	at := func(i int) int64 { return 1_000_000 + int64(i)*1000 }
	cases := []struct {
		name string
		q    RunQuery
		f    func(i int) bool
		lo   int
		hi   int
	}{
		{"all", RunQuery{}, func(int) bool { return true }, 0, 299},
		{"workflow", RunQuery{Workflow: "wa"}, func(i int) bool { return i%2 == 0 }, 0, 299},
		{"workflow and time", RunQuery{Workflow: "wb", From: at(100), To: at(200)}, func(i int) bool { return i%2 == 1 }, 100, 200},
		{"time only", RunQuery{From: at(10), To: at(20)}, func(int) bool { return true }, 10, 20},
		{"event", RunQuery{EventName: "e.x"}, func(i int) bool { return i%3 == 0 }, 0, 299},
		{"workflow and event", RunQuery{Workflow: "wb", EventName: "e.x"}, func(i int) bool { return i%2 == 1 && i%3 == 0 }, 0, 299},
		{"label and app", RunQuery{Label: "hot", App: "app1", To: at(150)}, func(i int) bool { return i%5 == 0 }, 0, 150},
		{"nothing", RunQuery{Workflow: "none"}, func(int) bool { return false }, 0, 299},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := searchAll(t, s, tc.q, 7, 0, nil)
			require.Equal(t, want(tc.lo, tc.hi, tc.f), got)
		})
	}

	// The examine bound: a keep that rejects most runs makes short pages with cursors,
	// and following them finds every match.
	keep := func(r *Run, initial func() []byte) bool { return string(initial()) != "" && r.ID[len(r.ID)-1] == '7' }
	got, pages := searchAll(t, s, RunQuery{Workflow: "wb"}, 10, 20, keep)
	require.Equal(t, want(0, 299, func(i int) bool { return i%2 == 1 && i%10 == 7 }), got)
	require.GreaterOrEqual(t, pages, 150/20, "at most 20 candidates examined per page")
}

// A data file from before the search index: Open builds it, and the search finds runs
// of either record form.
func TestOpenBuildsSearchIndexOfAnOlderFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "duraton.db")
	s, err := Open(path, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Update(func(tx *Tx) error { return tx.CreateProject(&Project{ID: "p"}) }))
	searchFixture(t, s)
	// The file as an earlier version left it: no search entries, no built mark.
	require.NoError(t, s.Update(func(tx *Tx) error {
		meta, err := tx.writeBucket("p", bucketMeta)
		require.NoError(t, err)
		require.NoError(t, meta.Delete([]byte(keySearchIndexes)))
		idx, err := tx.writeBucket("p", bucketRunSearch)
		require.NoError(t, err)
		c := idx.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.First() {
			require.NoError(t, c.Delete())
		}
		return nil
	}))
	got, _ := searchAll(t, s, RunQuery{Workflow: "wb"}, 50, 0, nil)
	require.Empty(t, got, "no index, nothing found")
	require.NoError(t, s.Close())

	s, err = Open(path, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	got, _ = searchAll(t, s, RunQuery{Workflow: "wb", EventName: "e.x"}, 50, 0, nil)
	require.Equal(t, want(0, 299, func(i int) bool { return i%2 == 1 && i%3 == 0 }), got)
}

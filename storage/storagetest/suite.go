package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// The storage behaviour suite (river's riverdrivertest idea): every behaviour of the store
// that the engine relies on, as subtests that each open a fresh store, so one suite runs
// against bbolt (storage/suite_test.go) and PostgreSQL (storage/pg/suite_test.go) alike.
// It drives exported Tx methods, the engine's real contract; ExerciseKV (suite_kv.go)
// drives the engine seam underneath. Times are passed in: nothing here sleeps.

// Open returns a fresh, empty store for t and closes it when t ends.
type Open func(t *testing.T) *storage.Store

// Exercise runs the behaviour suite against stores made by open.
func Exercise(t *testing.T, open Open) {
	groups := []struct {
		name  string
		tests map[string]func(*testing.T, *storage.Store)
	}{
		{"IDs", idTests},
		{"Due", dueTests},
		{"Messages", messageTests},
		{"CompareAndSet", casTests},
		{"GroupCommit", groupCommitTests},
		{"Projects", projectTests},
		{"Listings", listingTests},
		{"Retention", retentionTests},
		{"Flow", flowTests},
		{"Gates", gateTests},
		{"Buffers", bufferTests},
		{"Timers", timerTests},
		{"Runs", runTests},
		{"Search", searchTests}, // suite_search.go
		{"Records", recordTests},
		{"Large", largeTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, name := range sortedKeys(g.tests) {
				test := g.tests[name]
				t.Run(name, func(t *testing.T) { test(t, fresh(t, open)) })
			}
		})
	}
}

// Projects every fresh store has.
const (
	projectP = "p"
	projectQ = "q"
)

// base is the suite's fixed clock.
var base = time.Unix(1_700_000_000, 0)

// fresh opens a store and creates projects p and q in it.
func fresh(t *testing.T, open Open) *storage.Store {
	t.Helper()
	s := open(t)
	for _, id := range []string{projectP, projectQ} {
		require.NoError(t, s.Update(func(tx *storage.Tx) error {
			return tx.CreateProject(&storage.Project{ID: id, Name: "project " + id, CreatedAt: base.UnixMilli(), CurrentSigningKey: "cur-" + id, NextSigningKey: "next-" + id})
		}))
	}
	return s
}

func update(t *testing.T, s *storage.Store, fn func(tx *storage.Tx) error) {
	t.Helper()
	require.NoError(t, s.Update(fn))
}

func view(t *testing.T, s *storage.Store, fn func(tx *storage.Tx) error) {
	t.Helper()
	require.NoError(t, s.View(fn))
}

// message is a pending message of project p due at due.
func message(ids *storage.IDGen, project string, due time.Time) *storage.Message {
	return &storage.Message{ID: ids.New(storage.PrefixMessage, due), Project: project, Kind: storage.KindMessage,
		URL: "https://example.com/" + project, Method: "POST", Body: []byte("body"), CreatedAt: due.UnixMilli(),
		DueAt: due.UnixNano(), State: storage.StateCreated}
}

// ---- ids

var idTests = map[string]func(*testing.T, *storage.Store){
	// Ids made by one generator sort in the order they were made, even when the clock
	// stands still or goes back, and IDAt cuts exactly between before and after a time:
	// log listings and retention sweeps rely on both, through the engine's key order.
	"OrderedByCreationThroughTheStore": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		times := []time.Time{base, base, base.Add(-time.Hour), base.Add(time.Nanosecond), base.Add(time.Second), base.Add(time.Second)}
		var made []string
		update(t, s, func(tx *storage.Tx) error {
			made = made[:0] // the function may run twice
			for i, at := range times {
				id, stamped := ids.NewAt(storage.PrefixLog, at)
				made = append(made, id)
				if err := tx.AppendLog(projectP, &storage.LogEvent{ID: id, Time: stamped.UnixMilli(), State: storage.StateCreated, MessageID: fmt.Sprint("m", i)}); err != nil {
					return err
				}
			}
			return nil
		})
		for i := 1; i < len(made); i++ {
			require.Less(t, made[i-1], made[i], "id %d made after id %d sorts below it", i, i-1)
		}
		var listed []string
		view(t, s, func(tx *storage.Tx) error {
			evs, next, err := tx.ListLogs(projectP, "", 100, 0, func(*storage.LogEvent) bool { return true })
			require.Empty(t, next)
			for _, ev := range evs {
				listed = append(listed, ev.ID)
			}
			return err
		})
		want := append([]string(nil), made...)
		for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
			want[i], want[j] = want[j], want[i]
		}
		require.Equal(t, want, listed, "logs list newest first, in creation order")

		cut := storage.IDAt(storage.PrefixLog, base.Add(time.Second))
		var n int
		update(t, s, func(tx *storage.Tx) (err error) {
			n, err = tx.DeleteLogsBefore(projectP, cut, 100)
			return err
		})
		require.Equal(t, 4, n, "ids made before the cut-off time are below IDAt")
		view(t, s, func(tx *storage.Tx) error {
			evs, _, err := tx.ListLogs(projectP, "", 100, 0, func(*storage.LogEvent) bool { return true })
			require.Len(t, evs, 2)
			return err
		})
	},
}

// ---- due index

// dueEntry is a due entry with every field set, so a round trip shows any lost field.
func dueEntry(ids *storage.IDGen, due time.Time, project string) storage.DueEntry {
	return storage.DueEntry{DueAt: due.UnixNano(), MessageID: ids.New(storage.PrefixMessage, base), Project: project, Queue: "queue-1",
		FlowKey: "key-1", Limits: flowctl.Limits{Parallelism: 2, Rate: 10, Period: time.Second}, OrderAt: due.UnixNano() - 5,
		Extra: []storage.ExtraKey{{Key: "extra", Parallelism: 3}}, ShiftMs: 7,
		Gate:   &storage.StartGate{Key: "gate\x00key", Limit: 4, PerMs: 1000},
		Tokens: &storage.TokenGate{Key: "tokens", Tokens: 500, PerMs: 60000, Estimate: 250}}
}

// scanAll pages through the whole due index, size entries per read transaction.
func scanAll(t *testing.T, s *storage.Store, size int) []storage.DueEntry {
	t.Helper()
	var out []storage.DueEntry
	var after []byte
	for {
		var page []storage.DueEntry
		view(t, s, func(tx *storage.Tx) error {
			page = page[:0]
			return tx.ScanDue(after, func(e storage.DueEntry) bool {
				page = append(page, e)
				return len(page) < size
			})
		})
		if len(page) > 0 && after != nil {
			require.Greater(t, string(page[0].Key()), string(after), "a scan resumes strictly after its key")
		}
		out = append(out, page...)
		if len(page) < size {
			return out
		}
		require.Less(t, len(out), 1_000_000, "the due index does not end")
		after = page[len(page)-1].Key()
	}
}

var dueTests = map[string]func(*testing.T, *storage.Store){
	// The index orders entries by due time, then message id, across projects; paging with
	// the last key read visits every entry exactly once; an entry keeps every field.
	"OrderAndPaging": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		dues := []time.Duration{3 * time.Second, 0, time.Second, time.Second, 2 * time.Second, 100 * 365 * 24 * time.Hour, 0, time.Nanosecond}
		var entries []storage.DueEntry
		for i, d := range dues {
			e := dueEntry(&ids, base.Add(d), []string{projectP, projectQ}[i%2])
			if i == 6 {
				e = storage.DueEntry{DueAt: e.DueAt, MessageID: e.MessageID, Project: e.Project} // only the required fields
			}
			entries = append(entries, e)
		}
		want := putDue(t, s, entries)
		for _, size := range []int{1, 2, 3, len(want), len(want) + 1} {
			got := scanAll(t, s, size)
			require.Equal(t, want, got, "page size %d", size)
		}
		// A scan after a key that is not in the index starts at the next one.
		gone := want[2]
		update(t, s, func(tx *storage.Tx) error { return tx.DeleteDue(gone) })
		var got []storage.DueEntry
		view(t, s, func(tx *storage.Tx) error {
			require.False(t, tx.HasDue(gone))
			require.True(t, tx.HasDue(want[3]))
			return tx.ScanDue(gone.Key(), func(e storage.DueEntry) bool { got = append(got, e); return true })
		})
		require.Equal(t, want[3:], got)
		// After the last key: nothing.
		view(t, s, func(tx *storage.Tx) error {
			return tx.ScanDue(want[len(want)-1].Key(), func(e storage.DueEntry) bool {
				t.Errorf("entry %s after the last one", e.MessageID)
				return true
			})
		})
	},
	// Entries written and removed within one transaction are seen by the scans that
	// follow in it (the dispatcher moves an entry and rescans in one transaction).
	"ScanSeesOwnWrites": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		a, b, c := dueEntry(&ids, base, projectP), dueEntry(&ids, base.Add(time.Second), projectP), dueEntry(&ids, base.Add(2*time.Second), projectP)
		update(t, s, func(tx *storage.Tx) error { return tx.PutDue(b) })
		var first, second []string
		update(t, s, func(tx *storage.Tx) error {
			first, second = nil, nil
			if err := tx.PutDue(a); err != nil {
				return err
			}
			if err := tx.PutDue(c); err != nil {
				return err
			}
			if err := tx.DeleteDue(b); err != nil {
				return err
			}
			if err := tx.ScanDue(nil, func(e storage.DueEntry) bool { first = append(first, e.MessageID); return true }); err != nil {
				return err
			}
			moved := b
			moved.DueAt = base.Add(-time.Second).UnixNano()
			if err := tx.PutDue(moved); err != nil {
				return err
			}
			return tx.ScanDue(nil, func(e storage.DueEntry) bool { second = append(second, e.MessageID); return true })
		})
		require.Equal(t, []string{a.MessageID, c.MessageID}, first, "a scan sees the transaction's own puts and deletes")
		require.Equal(t, []string{b.MessageID, a.MessageID, c.MessageID}, second, "a scan sees an entry moved in the transaction")
	},
}

// sortDue sorts entries by index key.
// putDue stores entries in one transaction and returns them in the due index's order.
func putDue(t *testing.T, s *storage.Store, entries []storage.DueEntry) []storage.DueEntry {
	t.Helper()
	update(t, s, func(tx *storage.Tx) error {
		for _, e := range entries {
			if err := tx.PutDue(e); err != nil {
				return err
			}
		}
		return nil
	})
	want := append([]storage.DueEntry(nil), entries...)
	sortDue(want)
	return want
}

func sortDue(es []storage.DueEntry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && string(es[j].Key()) < string(es[j-1].Key()); j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// ---- messages

var messageTests = map[string]func(*testing.T, *storage.Store){
	// Messages are kept per project, listed in id order, replaced and removed.
	"PutReadListDelete": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		var ms []*storage.Message
		for i := range 5 {
			ms = append(ms, message(&ids, projectP, base.Add(time.Duration(i)*time.Second)))
		}
		other := message(&ids, projectQ, base)
		update(t, s, func(tx *storage.Tx) error {
			for _, m := range append([]*storage.Message{ms[3], ms[0], ms[4], ms[2], ms[1]}, other) {
				if err := tx.PutMessage(m); err != nil {
					return err
				}
			}
			return nil
		})
		update(t, s, func(tx *storage.Tx) error {
			ms[1].State, ms[1].Retried = storage.StateRetry, 1
			if err := tx.PutMessage(ms[1]); err != nil {
				return err
			}
			return tx.DeleteMessage(projectP, ms[2].ID)
		})
		view(t, s, func(tx *storage.Tx) error {
			var got []string
			require.NoError(t, tx.ForEachMessage(projectP, func(m *storage.Message) bool { got = append(got, m.ID); return true }))
			require.Equal(t, []string{ms[0].ID, ms[1].ID, ms[3].ID, ms[4].ID}, got)
			got = got[:0]
			require.NoError(t, tx.ForEachMessage(projectP, func(m *storage.Message) bool { got = append(got, m.ID); return len(got) < 2 }))
			require.Len(t, got, 2, "listing stops when fn returns false")
			m, err := tx.Message(projectP, ms[1].ID)
			require.NoError(t, err)
			require.Equal(t, storage.StateRetry, m.State)
			require.Equal(t, ms[1].Body, m.Body)
			_, err = tx.Message(projectP, ms[2].ID)
			require.ErrorIs(t, err, storage.ErrNotFound)
			_, err = tx.Message(projectP, other.ID)
			require.ErrorIs(t, err, storage.ErrNotFound, "a project sees only its own messages")
			_, err = tx.Message("nope", ms[0].ID)
			require.ErrorIs(t, err, storage.ErrNotFound)
			return nil
		})
		err := s.Update(func(tx *storage.Tx) error {
			return tx.PutMessage(&storage.Message{ID: "msg_x", Project: "nope", URL: "https://example.com", Method: "POST"})
		})
		require.ErrorIs(t, err, storage.ErrNotFound, "a write to a project that does not exist")
	},
}

// ---- compare-and-set transitions

// transition moves message id of project p from state `from` to `to`, or fails with
// ErrConflict when it is not in `from` (delivery/outcome.go's pattern).
func transition(s *storage.Store, id, from, to string) error {
	return s.Update(func(tx *storage.Tx) error {
		m, err := tx.Message(projectP, id)
		if err != nil {
			return err
		}
		if m.State != from {
			return storage.ErrConflict
		}
		m.State = to
		return tx.PutMessage(m)
	})
}

var casTests = map[string]func(*testing.T, *storage.Store){
	// Of many concurrent transitions out of one state exactly one wins, whether they
	// share a group commit or not: each sees the writes committed or made before it.
	"ConcurrentTransitionsOneWins": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		m := message(&ids, projectP, base)
		update(t, s, func(tx *storage.Tx) error { return tx.PutMessage(m) })
		const n = 32
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = transition(s, m.ID, storage.StateCreated, fmt.Sprint("ACTIVE-", i)) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "transitions %d and %d both won", winner, i)
				winner = i
				continue
			}
			require.ErrorIs(t, err, storage.ErrConflict, "transition %d", i)
		}
		require.NotEqual(t, -1, winner, "no transition won")
		view(t, s, func(tx *storage.Tx) error {
			got, err := tx.Message(projectP, m.ID)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprint("ACTIVE-", winner), got.State)
			return nil
		})
	},
	// A chain of transitions applies in order; a stale one is refused and changes nothing.
	"StaleTransitionRefused": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		m := message(&ids, projectP, base)
		update(t, s, func(tx *storage.Tx) error { return tx.PutMessage(m) })
		require.NoError(t, transition(s, m.ID, storage.StateCreated, storage.StateActive))
		require.NoError(t, transition(s, m.ID, storage.StateActive, storage.StateRetry))
		require.ErrorIs(t, transition(s, m.ID, storage.StateActive, storage.StateDelivered), storage.ErrConflict)
		require.ErrorIs(t, transition(s, "msg_missing", storage.StateActive, storage.StateDelivered), storage.ErrNotFound)
		view(t, s, func(tx *storage.Tx) error {
			got, err := tx.Message(projectP, m.ID)
			require.NoError(t, err)
			require.Equal(t, storage.StateRetry, got.State)
			return nil
		})
	},
	// Ending a run is a transition too: concurrent enders of one live run, one wins.
	"RunEndsOnce": func(t *testing.T, s *storage.Store) {
		run := &storage.Run{ID: "wfr_1", URL: "https://example.com/wf", CreatedAt: base.UnixMilli(), State: storage.RunStarted}
		update(t, s, func(tx *storage.Tx) error { return tx.PutRun(projectP, run) })
		const n = 16
		var won atomic.Int32
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				err := s.Update(func(tx *storage.Tx) error {
					r, err := tx.Run(projectP, run.ID)
					if err != nil {
						return err
					}
					if !r.Live() {
						return storage.ErrConflict
					}
					r.State, r.EndedAt = []string{storage.RunSuccess, storage.RunFailed, storage.RunCanceled}[i%3], base.UnixMilli()+int64(i)
					return tx.PutRun(projectP, r)
				})
				if err == nil {
					won.Add(1)
				} else if !errors.Is(err, storage.ErrConflict) {
					t.Errorf("ender %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int32(1), won.Load())
	},
}

// counter reads the suite's counter (a queue's parallelism: any record would do).
func counter(tx *storage.Tx) (int, error) {
	q, err := tx.Queue(projectP, "counter")
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return q.Parallelism, nil
}

// countAndQueue adds one to the suite's counter and puts queue q<i>: a function's writes
// whose effect the commit tests can count.
func countAndQueue(tx *storage.Tx, i int) error {
	c, err := counter(tx)
	if err != nil {
		return err
	}
	if err := tx.PutQueue(projectP, &storage.Queue{Name: "counter", Parallelism: c + 1}); err != nil {
		return err
	}
	return tx.PutQueue(projectP, &storage.Queue{Name: fmt.Sprintf("q%02d", i)})
}

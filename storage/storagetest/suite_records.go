package storagetest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// Projects and tokens, listings and their cursors, retention sweeps, per-project records.

func sortedKeys[V any](m map[string]V) []string {
	return slices.SortedFunc(maps.Keys(m), cmp.Compare[string])
}

func all[T any](*T) bool { return true }

var projectTests = map[string]func(*testing.T, *storage.Store){
	// Projects are created once, listed, replaced; tokens point at them, are listed in
	// hash order, by prefix, and revoked.
	"ProjectsAndTokens": func(t *testing.T, s *storage.Store) {
		err := s.Update(func(tx *storage.Tx) error { return tx.CreateProject(&storage.Project{ID: projectP}) })
		require.Error(t, err, "a project id is created once")
		update(t, s, func(tx *storage.Tx) error {
			p, err := tx.Project(projectP)
			if err != nil {
				return err
			}
			p.CurrentSigningKey, p.NextSigningKey = p.NextSigningKey, "next-2"
			if err := tx.PutProject(p); err != nil {
				return err
			}
			for _, tok := range []struct{ hash, project string }{{"bb01", projectP}, {"aa01", projectQ}, {"bb02", projectQ}, {"b", projectP}} {
				if err := tx.PutToken(tok.hash, tok.project); err != nil {
					return err
				}
			}
			return nil
		})
		update(t, s, func(tx *storage.Tx) error { return tx.DeleteToken("b") })
		require.ErrorIs(t, s.Update(func(tx *storage.Tx) error { return tx.DeleteToken("b") }), storage.ErrNotFound)
		view(t, s, func(tx *storage.Tx) error {
			ps, err := tx.Projects()
			require.NoError(t, err)
			require.Len(t, ps, 2)
			require.Equal(t, projectP, ps[0].ID)
			require.Equal(t, projectQ, ps[1].ID)
			require.Equal(t, "next-p", ps[0].CurrentSigningKey)
			require.Equal(t, "project "+projectP, ps[0].Name, "PutProject replaced the whole record")
			_, err = tx.Project("nope")
			require.ErrorIs(t, err, storage.ErrNotFound)

			got, err := tx.TokenProject("bb02")
			require.NoError(t, err)
			require.Equal(t, projectQ, got)
			_, err = tx.TokenProject("b")
			require.ErrorIs(t, err, storage.ErrNotFound)
			toks, err := tx.Tokens()
			require.NoError(t, err)
			require.Equal(t, []storage.TokenEntry{{Hash: "aa01", Project: projectQ}, {Hash: "bb01", Project: projectP}, {Hash: "bb02", Project: projectQ}}, toks)
			require.Equal(t, []storage.TokenEntry{{Hash: "bb01", Project: projectP}, {Hash: "bb02", Project: projectQ}}, tx.TokensWithPrefix("bb"))
			require.Empty(t, tx.TokensWithPrefix("c"))
			return nil
		})
	},
	// The instance mode is empty on a new store and kept once set.
	"Mode": func(t *testing.T, s *storage.Store) {
		view(t, s, func(tx *storage.Tx) error { require.Empty(t, tx.Mode()); return nil })
		update(t, s, func(tx *storage.Tx) error { return tx.SetMode("serve") })
		view(t, s, func(tx *storage.Tx) error { require.Equal(t, "serve", tx.Mode()); return nil })
	},
}

// logs appends n log events of project p, one per second from base; it returns their ids.
func logs(t *testing.T, s *storage.Store, ids *storage.IDGen, n int, body func(i int) []byte) []string {
	t.Helper()
	out := make([]string, n)
	for i := range n {
		out[i] = ids.New(storage.PrefixLog, base.Add(time.Duration(i)*time.Second))
	}
	update(t, s, func(tx *storage.Tx) error {
		for i, id := range out {
			ev := &storage.LogEvent{ID: id, Time: base.Add(time.Duration(i) * time.Second).UnixMilli(), State: storage.StateDelivered,
				MessageID: fmt.Sprint("msg_", i), URL: "https://example.com", ResponseBody: body(i)}
			if err := tx.AppendLog(projectP, ev); err != nil {
				return err
			}
		}
		return nil
	})
	return out
}

var listingTests = map[string]func(*testing.T, *storage.Store){
	// Logs page newest first; the cursor of one page starts the next strictly below it;
	// a filter skips events without ending the page early.
	"LogsPageWithCursor": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		made := logs(t, s, &ids, 10, func(int) []byte { return []byte("ok") })
		var got []string
		before := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 10, "paging does not end")
			var evs []storage.LogEvent
			var next string
			view(t, s, func(tx *storage.Tx) (err error) {
				evs, next, err = tx.ListLogs(projectP, before, 3, 0, func(ev *storage.LogEvent) bool { return ev.MessageID != "msg_4" })
				return err
			})
			require.LessOrEqual(t, len(evs), 3)
			for _, ev := range evs {
				got = append(got, ev.ID)
			}
			if next == "" {
				break
			}
			require.Equal(t, evs[len(evs)-1].ID, next)
			before = next
		}
		want := slices.Clone(made)
		slices.Reverse(want)
		want = slices.Delete(want, 5, 6) // msg_4
		require.Equal(t, want, got)
		// A cursor that is no stored id (an id made later, or between two) still works.
		view(t, s, func(tx *storage.Tx) error {
			evs, _, err := tx.ListLogs(projectP, storage.IDAt(storage.PrefixLog, base.Add(time.Hour)), 2, 0, all)
			require.NoError(t, err)
			require.Equal(t, []string{made[9], made[8]}, []string{evs[0].ID, evs[1].ID})
			evs, _, err = tx.ListLogs(projectP, storage.IDAt(storage.PrefixLog, base.Add(2500*time.Millisecond)), 10, 0, all)
			require.NoError(t, err)
			require.Len(t, evs, 3)
			require.Equal(t, made[2], evs[0].ID)
			evs, next, err := tx.ListLogs(projectP, made[0], 10, 0, all)
			require.NoError(t, err)
			require.Empty(t, evs)
			require.Empty(t, next)
			evs, _, err = tx.ListLogs(projectQ, "", 10, 0, all)
			require.NoError(t, err)
			require.Empty(t, evs, "another project's logs")
			return nil
		})
	},
	// A byte budget ends a page once the stored size reaches it; a page always has one
	// event, however large.
	"LogsByteBudget": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		made := logs(t, s, &ids, 6, func(i int) []byte { return []byte(strings.Repeat("x", 1000*(i+1))) })
		view(t, s, func(tx *storage.Tx) error {
			evs, next, err := tx.ListLogs(projectP, "", 10, 100, all)
			require.NoError(t, err)
			require.Len(t, evs, 1, "one event even when it alone exceeds the budget")
			require.Equal(t, made[5], next)
			evs, next, err = tx.ListLogs(projectP, made[5], 10, 5000+4000, all) // 5 kB + 4 kB bodies plus the rest of the records
			require.NoError(t, err)
			require.Len(t, evs, 2)
			require.Equal(t, made[3], next)
			return nil
		})
	},
	// The dead-letter listing pages the same way, and one entry is read and deleted.
	"DLQPageAndDelete": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		var made []string
		update(t, s, func(tx *storage.Tx) error {
			made = made[:0]
			for i := range 7 {
				e := &storage.DLQEntry{DLQID: ids.New(storage.PrefixDLQ, base.Add(time.Duration(i)*time.Second)), FailedAt: base.UnixMilli(),
					Message: *message(&ids, projectP, base), Response: storage.Response{Status: 500 + i, Body: []byte(strings.Repeat("y", 100*i))}}
				made = append(made, e.DLQID)
				if err := tx.PutDLQ(projectP, e); err != nil {
					return err
				}
			}
			return nil
		})
		update(t, s, func(tx *storage.Tx) error { return tx.DeleteDLQ(projectP, made[3]) })
		require.ErrorIs(t, s.Update(func(tx *storage.Tx) error { return tx.DeleteDLQ(projectP, made[3]) }), storage.ErrNotFound)
		var got []string
		before := ""
		for {
			var es []storage.DLQEntry
			var next string
			view(t, s, func(tx *storage.Tx) (err error) {
				es, next, err = tx.ListDLQ(projectP, before, 2, 0, all)
				return err
			})
			for _, e := range es {
				got = append(got, e.DLQID)
			}
			if next == "" {
				break
			}
			before = next
		}
		require.Equal(t, []string{made[6], made[5], made[4], made[2], made[1], made[0]}, got)
		view(t, s, func(tx *storage.Tx) error {
			e, err := tx.DLQ(projectP, made[2])
			require.NoError(t, err)
			require.Equal(t, 502, e.Response.Status)
			_, err = tx.DLQ(projectP, made[3])
			require.ErrorIs(t, err, storage.ErrNotFound)
			es, next, err := tx.ListDLQ(projectP, "", 10, 1, all)
			require.NoError(t, err)
			require.Len(t, es, 1)
			require.Equal(t, made[6], next)
			return nil
		})
	},
	// Native events list newest first from an inclusive cursor, filtered by name, and a
	// scan limit returns a cursor where the scan stopped.
	"EventsPage": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		var made []string
		update(t, s, func(tx *storage.Tx) error {
			made = made[:0]
			for i := range 6 {
				e := &storage.Event{ID: ids.New("evt_", base.Add(time.Duration(i)*time.Second)), Name: []string{"a", "b"}[i%2], Data: []byte(`{}`), Ts: base.UnixMilli()}
				made = append(made, e.ID)
				if err := tx.PutEvent(projectP, e); err != nil {
					return err
				}
			}
			return nil
		})
		view(t, s, func(tx *storage.Tx) error {
			es, next, err := tx.Events(projectP, "", "", 4, 100)
			require.NoError(t, err)
			require.Equal(t, []string{made[5], made[4], made[3], made[2]}, eventIDs(es))
			require.Equal(t, made[1], next)
			es, next, err = tx.Events(projectP, "", next, 4, 100)
			require.NoError(t, err)
			require.Equal(t, []string{made[1], made[0]}, eventIDs(es))
			require.Empty(t, next)
			es, next, err = tx.Events(projectP, "a", "", 10, 3)
			require.NoError(t, err)
			require.Equal(t, []string{made[4]}, eventIDs(es), "three read, one named a")
			require.Equal(t, made[2], next)
			es, _, err = tx.Events(projectP, "a", storage.IDAt("evt_", base.Add(2500*time.Millisecond)), 10, 10)
			require.NoError(t, err)
			require.Equal(t, []string{made[2], made[0]}, eventIDs(es), "a cursor between ids starts below it")
			e, err := tx.Event(projectP, made[3])
			require.NoError(t, err)
			require.Equal(t, "b", e.Name)
			return nil
		})
	},
}

func eventIDs(es []storage.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func putRunWithData(tx *storage.Tx, r *storage.Run) error {
	r.HistoryLen, r.HistoryBytes = 2, 10
	if err := tx.PutRun(projectP, r); err != nil {
		return err
	}
	if err := tx.IndexRun(projectP, r); err != nil {
		return err
	}
	for i := range 2 {
		if err := tx.PutHistory(projectP, r.ID, i, &storage.HistoryEntry{MessageID: fmt.Sprint("msg_", r.ID, i), Body: []byte("b"), CallType: storage.CallStep, CreatedAt: r.CreatedAt}); err != nil {
			return err
		}
	}
	if err := tx.PutStepKey(projectP, r.ID, "step-a", "msg_"+r.ID); err != nil {
		return err
	}
	return tx.LinkRunMessage(projectP, r.ID, "msg_pending_"+r.ID)
}

func runIDs(rs []storage.Run) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func logIDs(evs []storage.LogEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

var recordTests = map[string]func(*testing.T, *storage.Store){
	// Named records (queues, schedules, URL groups, apps) are listed by name, counted,
	// and deleted once; counts include records written earlier in the same transaction
	// (a limit check after a create in one group commit must see it).
	"NamedRecordsAndCounts": func(t *testing.T, s *storage.Store) {
		var counts [][4]int
		count := func(tx *storage.Tx) [4]int {
			return [4]int{tx.QueueCount(projectP), tx.ScheduleCount(projectP), tx.TopicCount(projectP), tx.AppCount(projectP)}
		}
		update(t, s, func(tx *storage.Tx) error {
			counts = counts[:0]
			for _, name := range []string{"b", "a", "c"} {
				if err := tx.PutQueue(projectP, &storage.Queue{Name: name, Parallelism: 1}); err != nil {
					return err
				}
				if err := tx.PutSchedule(&storage.Schedule{ID: "scd_" + name, Project: projectP, Cron: "* * * * *"}); err != nil {
					return err
				}
				if err := tx.PutTopic(projectP, &storage.Topic{Name: name, Endpoints: []storage.TopicEndpoint{{URL: "https://example.com/" + name}}}); err != nil {
					return err
				}
				if err := tx.PutApp(projectP, &storage.App{Name: name}); err != nil {
					return err
				}
				counts = append(counts, count(tx))
			}
			return nil
		})
		require.Equal(t, [][4]int{{1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}}, counts, "counts inside the transaction that wrote the records")
		var after [4]int
		update(t, s, func(tx *storage.Tx) error {
			if err := tx.PutQueue(projectP, &storage.Queue{Name: "a", Parallelism: 5}); err != nil { // a replacement
				return err
			}
			if err := tx.DeleteQueue(projectP, "b"); err != nil {
				return err
			}
			if err := tx.DeleteSchedule(projectP, "scd_b"); err != nil {
				return err
			}
			if err := tx.DeleteTopic(projectP, "b"); err != nil {
				return err
			}
			if err := tx.DeleteApp(projectP, "b"); err != nil {
				return err
			}
			after = count(tx)
			return nil
		})
		require.Equal(t, [4]int{2, 2, 2, 2}, after, "counts after a replacement and deletions in the same transaction")
		require.ErrorIs(t, s.Update(func(tx *storage.Tx) error { return tx.DeleteQueue(projectP, "b") }), storage.ErrNotFound)
		view(t, s, func(tx *storage.Tx) error {
			require.Equal(t, [4]int{2, 2, 2, 2}, count(tx))
			require.Equal(t, [4]int{0, 0, 0, 0}, [4]int{tx.QueueCount(projectQ), tx.ScheduleCount(projectQ), tx.TopicCount(projectQ), tx.AppCount(projectQ)})
			qs, err := tx.Queues(projectP)
			require.NoError(t, err)
			require.Len(t, qs, 2)
			require.Equal(t, "a", qs[0].Name)
			require.Equal(t, 5, qs[0].Parallelism)
			require.Equal(t, "c", qs[1].Name)
			ss, err := tx.Schedules(projectP)
			require.NoError(t, err)
			require.Len(t, ss, 2)
			ts, err := tx.Topics(projectP)
			require.NoError(t, err)
			require.Len(t, ts, 2)
			as, err := tx.Apps(projectP)
			require.NoError(t, err)
			require.Len(t, as, 2)
			_, err = tx.Topic(projectP, "b")
			require.ErrorIs(t, err, storage.ErrNotFound)
			return nil
		})
	},
	// Workflow definitions index their triggers; an event name finds exactly its
	// workflows (not those of a name it prefixes), and a removed definition is gone
	// from the index.
	"WorkflowTriggers": func(t *testing.T, s *storage.Store) {
		update(t, s, func(tx *storage.Tx) error {
			for _, d := range []*storage.WorkflowDef{
				{App: "app", Name: "w1", URL: "https://example.com/1", Triggers: []storage.Trigger{{Event: "order"}, {Event: "order.paid"}}},
				{App: "app", Name: "w2", URL: "https://example.com/2", Triggers: []storage.Trigger{{Event: "order"}}},
				{App: "app", Name: "w3", URL: "https://example.com/3", Triggers: []storage.Trigger{{Event: "orders"}}},
			} {
				if err := tx.PutWorkflowDef(projectP, d); err != nil {
					return err
				}
			}
			return nil
		})
		names := func(ds []storage.WorkflowDef) []string {
			var out []string
			for _, d := range ds {
				out = append(out, d.Name)
			}
			return out
		}
		view(t, s, func(tx *storage.Tx) error {
			ds, err := tx.TriggeredBy(projectP, "order")
			require.NoError(t, err)
			require.Equal(t, []string{"w1", "w2"}, names(ds))
			return nil
		})
		update(t, s, func(tx *storage.Tx) error { return tx.DeleteWorkflowDef(projectP, "w1") })
		require.ErrorIs(t, s.Update(func(tx *storage.Tx) error { return tx.DeleteWorkflowDef(projectP, "w1") }), storage.ErrNotFound)
		view(t, s, func(tx *storage.Tx) error {
			ds, err := tx.TriggeredBy(projectP, "order")
			require.NoError(t, err)
			require.Equal(t, []string{"w2"}, names(ds))
			ds, err = tx.TriggeredBy(projectP, "order.paid")
			require.NoError(t, err)
			require.Empty(t, ds)
			ds, err = tx.WorkflowDefs(projectP)
			require.NoError(t, err)
			require.Equal(t, []string{"w2", "w3"}, names(ds))
			return nil
		})
	},
}

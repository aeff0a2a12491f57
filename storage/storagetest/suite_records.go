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

var retentionTests = map[string]func(*testing.T, *storage.Store){
	// Log and dead-letter sweeps remove the oldest records below the cut-off, at most
	// limit per call, and nothing at or above it.
	"LogsAndDLQBefore": func(t *testing.T, s *storage.Store) {
		var ids storage.IDGen
		made := logs(t, s, &ids, 8, func(int) []byte { return nil })
		var dlq []string
		var dlqIDs storage.IDGen // ids already made the logs' generator's clock run ahead
		update(t, s, func(tx *storage.Tx) error {
			dlq = dlq[:0]
			for i := range 5 {
				e := &storage.DLQEntry{DLQID: dlqIDs.New(storage.PrefixDLQ, base.Add(time.Duration(i)*time.Second)), Message: *message(&ids, projectP, base)}
				dlq = append(dlq, e.DLQID)
				if err := tx.PutDLQ(projectP, e); err != nil {
					return err
				}
			}
			return nil
		})
		cut := storage.IDAt(storage.PrefixLog, base.Add(5*time.Second))
		var n1, n2, n3 int
		update(t, s, func(tx *storage.Tx) (err error) {
			n1, err = tx.DeleteLogsBefore(projectP, cut, 3)
			return err
		})
		update(t, s, func(tx *storage.Tx) (err error) {
			if n2, err = tx.DeleteLogsBefore(projectP, cut, 3); err != nil {
				return err
			}
			n3, err = tx.DeleteDLQBefore(projectP, storage.IDAt(storage.PrefixDLQ, base.Add(2*time.Second)), 100)
			return err
		})
		require.Equal(t, []int{3, 2, 2}, []int{n1, n2, n3})
		view(t, s, func(tx *storage.Tx) error {
			evs, _, err := tx.ListLogs(projectP, "", 100, 0, all)
			require.NoError(t, err)
			require.Equal(t, []string{made[7], made[6], made[5]}, logIDs(evs))
			es, _, err := tx.ListDLQ(projectP, "", 100, 0, all)
			require.NoError(t, err)
			require.Len(t, es, 3)
			require.Equal(t, dlq[2], es[2].DLQID)
			n, err := tx.DeleteLogsBefore(projectQ, cut, 10)
			require.NoError(t, err)
			require.Zero(t, n)
			return nil
		})
	},
	// A dedup record is honoured until it expires (strictly before now) and swept after,
	// at most limit per call; event dedupe records share the sweep but not the names.
	"DedupExpiry": func(t *testing.T, s *storage.Store) {
		now := base.UnixMilli()
		update(t, s, func(tx *storage.Tx) error {
			for i, exp := range []int64{now - 2, now - 1, now, now + 1, now - 3} {
				if err := tx.PutDedup(projectP, fmt.Sprint("d", i), &storage.DedupRecord{MessageID: fmt.Sprint("msg_", i), ExpiresAt: exp}); err != nil {
					return err
				}
			}
			return tx.PutEventDedup(projectP, "d0", &storage.DedupRecord{MessageID: "evt", ExpiresAt: now + 10})
		})
		view(t, s, func(tx *storage.Tx) error {
			r, err := tx.Dedup(projectP, "d0")
			require.NoError(t, err)
			require.Equal(t, "msg_0", r.MessageID)
			r, err = tx.EventDedup(projectP, "d0")
			require.NoError(t, err)
			require.Equal(t, "evt", r.MessageID, "event dedupe ids are a namespace of their own")
			_, err = tx.Dedup(projectQ, "d0")
			require.ErrorIs(t, err, storage.ErrNotFound)
			return nil
		})
		var n1, n2 int
		update(t, s, func(tx *storage.Tx) (err error) { n1, err = tx.DeleteExpiredDedup(projectP, now, 2); return err })
		update(t, s, func(tx *storage.Tx) (err error) { n2, err = tx.DeleteExpiredDedup(projectP, now, 10); return err })
		require.Equal(t, 2, n1)
		require.Equal(t, 1, n2)
		view(t, s, func(tx *storage.Tx) error {
			for i, kept := range []bool{false, false, true, true, false} {
				_, err := tx.Dedup(projectP, fmt.Sprint("d", i))
				if kept {
					require.NoError(t, err, "d%d has not expired", i)
				} else {
					require.ErrorIs(t, err, storage.ErrNotFound, "d%d expired", i)
				}
			}
			_, err := tx.EventDedup(projectP, "d0")
			require.NoError(t, err)
			return nil
		})
	},
	// Events kept for a run are taken once and expire by arrival time; a re-kept event
	// counts from its new arrival; native events are swept by id.
	"RunEventsAndEvents": func(t *testing.T, s *storage.Store) {
		now := base.UnixMilli()
		update(t, s, func(tx *storage.Tx) error {
			for i, ev := range []string{"e1", "e2", "e3", "e4"} {
				if err := tx.PutRunEvent(projectP, "wfr_a", ev, []byte(`"`+ev+`"`), now+int64(i)); err != nil {
					return err
				}
			}
			return tx.PutRunEvent(projectP, "wfr_a", "e1", []byte(`"again"`), now+10) // replaces e1
		})
		var taken []byte
		update(t, s, func(tx *storage.Tx) (err error) {
			taken, err = tx.TakeRunEvent(projectP, "wfr_a", "e2", now)
			return err
		})
		require.Equal(t, `"e2"`, string(taken))
		require.ErrorIs(t, s.Update(func(tx *storage.Tx) error {
			_, err := tx.TakeRunEvent(projectP, "wfr_a", "e2", now)
			return err
		}), storage.ErrNotFound, "an event is taken once")
		var swept int
		update(t, s, func(tx *storage.Tx) (err error) {
			swept, err = tx.DeleteExpiredRunEvents(projectP, now+3, 10)
			return err
		})
		require.Equal(t, 1, swept, "e3 only: it arrived before now+3; the take of e2 and the replacement of e1 removed their old index entries")
		view(t, s, func(tx *storage.Tx) error {
			u, err := tx.RunEvents(projectP, "wfr_a", "")
			require.NoError(t, err)
			require.Equal(t, 2, u.Count, "e1 (re-kept at now+10) and e4")
			return nil
		})
		var again []byte
		update(t, s, func(tx *storage.Tx) (err error) {
			again, err = tx.TakeRunEvent(projectP, "wfr_a", "e1", now)
			return err
		})
		require.Equal(t, `"again"`, string(again))

		var ids storage.IDGen
		var made []string
		update(t, s, func(tx *storage.Tx) error {
			made = made[:0]
			for i := range 5 {
				e := &storage.Event{ID: ids.New("evt_", base.Add(time.Duration(i)*time.Second)), Name: "n", Data: []byte(`1`)}
				made = append(made, e.ID)
				if err := tx.PutEvent(projectP, e); err != nil {
					return err
				}
			}
			return nil
		})
		var n1, n2 int
		cut := storage.IDAt("evt_", base.Add(3*time.Second))
		update(t, s, func(tx *storage.Tx) (err error) { n1, err = tx.DeleteEventsBefore(projectP, cut, 2); return err })
		update(t, s, func(tx *storage.Tx) (err error) { n2, err = tx.DeleteEventsBefore(projectP, cut, 2); return err })
		require.Equal(t, []int{2, 1}, []int{n1, n2})
		view(t, s, func(tx *storage.Tx) error {
			es, _, err := tx.Events(projectP, "", "", 10, 10)
			require.NoError(t, err)
			require.Equal(t, []string{made[4], made[3]}, eventIDs(es))
			return nil
		})
	},
	// Old runs are found oldest first below a time and deleted with everything they hold;
	// a younger run is untouched.
	"RunRetention": func(t *testing.T, s *storage.Store) {
		var runs []*storage.Run
		for i, id := range []string{"wfr_1", "wfr_2", "wfr_10", "wfr_20"} {
			runs = append(runs, &storage.Run{ID: id, URL: "https://example.com/wf", CreatedAt: base.UnixMilli() + int64(i), State: storage.RunSuccess})
		}
		update(t, s, func(tx *storage.Tx) error {
			for _, r := range runs {
				if err := putRunWithData(tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		var old []storage.Run
		view(t, s, func(tx *storage.Tx) (err error) {
			old, err = tx.OldRuns(projectP, base.UnixMilli()+3, 2)
			if err != nil {
				return err
			}
			younger, err := tx.OldRuns(projectP, base.UnixMilli()+2, 10)
			require.Equal(t, []string{"wfr_1", "wfr_2"}, runIDs(younger), "a run created at the cut-off is not older than it")
			return err
		})
		require.Equal(t, []string{"wfr_1", "wfr_2"}, runIDs(old), "oldest first, at most limit")
		update(t, s, func(tx *storage.Tx) error {
			for i := range old {
				if err := tx.DeleteRun(projectP, &old[i]); err != nil {
					return err
				}
			}
			return nil
		})
		view(t, s, func(tx *storage.Tx) error {
			for _, id := range []string{"wfr_1", "wfr_2"} {
				_, err := tx.Run(projectP, id)
				require.ErrorIs(t, err, storage.ErrNotFound)
				_, ok := tx.StepMessage(projectP, id, "step-a")
				require.False(t, ok)
				msgs, err := tx.RunMessages(projectP, id)
				require.NoError(t, err)
				require.Empty(t, msgs)
			}
			left, err := tx.OldRuns(projectP, base.UnixMilli()+100, 10)
			require.NoError(t, err)
			require.Equal(t, []string{"wfr_10", "wfr_20"}, runIDs(left))
			r, err := tx.Run(projectP, "wfr_10")
			require.NoError(t, err)
			require.Equal(t, 2, r.HistoryLen)
			h, err := tx.History(projectP, "wfr_10", 2)
			require.NoError(t, err)
			require.Len(t, h, 2)
			_, ok := tx.StepMessage(projectP, "wfr_10", "step-a")
			require.True(t, ok, "a run whose id extends a deleted one's keeps its data")
			msgs, err := tx.RunMessages(projectP, "wfr_10")
			require.NoError(t, err)
			require.Equal(t, []string{"msg_pending_wfr_10"}, msgs)
			return nil
		})
	},
}

// putRunWithData stores r (indexed) with two history entries, a step key and a pending
// message link.
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

package storagetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// Retention sweeps: logs, dead letters, runs, events, dedup records and the rest.

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
	// Runs that ended below a time are deleted oldest end first, at most limit per call,
	// with everything they hold, through the ended-runs index; live runs, however old,
	// and a run ended at the cut-off are kept; an index entry of a run that was
	// restarted is removed alone.
	"RunRetention": func(t *testing.T, s *storage.Store) {
		var runs []*storage.Run
		for i, id := range []string{"wfr_1", "wfr_2", "wfr_10", "wfr_20"} {
			runs = append(runs, &storage.Run{ID: id, URL: "https://example.com/wf", CreatedAt: base.UnixMilli() - 100 + int64(i), EndedAt: base.UnixMilli() + int64(i), State: storage.RunSuccess})
		}
		runs = append(runs, &storage.Run{ID: "wfr_live", URL: "https://example.com/wf", CreatedAt: base.UnixMilli() - 1000, State: storage.RunStarted})
		update(t, s, func(tx *storage.Tx) error {
			for _, r := range runs {
				if err := putRunWithData(tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		sweep := func(beforeMs int64, limit int) (n int) {
			update(t, s, func(tx *storage.Tx) (err error) {
				n, err = tx.DeleteRunsEndedBefore(projectP, beforeMs, limit)
				return err
			})
			return n
		}
		require.Equal(t, 2, sweep(base.UnixMilli()+3, 2), "oldest end first, at most limit")
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
			listed, _, err := tx.ListRuns(projectP, nil, 10, func(*storage.Run) bool { return true })
			require.NoError(t, err)
			require.Equal(t, []string{"wfr_20", "wfr_10", "wfr_live"}, runIDs(listed), "deleted runs leave the listing")
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
		require.Equal(t, 1, sweep(base.UnixMilli()+3, 10), "wfr_10; wfr_20 ended at the cut-off")
		require.Zero(t, sweep(base.UnixMilli()+3, 10))

		// wfr_20 is restarted: its entry is stale, removed alone; ended again, it goes.
		restarted := *runs[3]
		restarted.State, restarted.EndedAt = storage.RunStarted, 0
		update(t, s, func(tx *storage.Tx) error { return tx.PutRun(projectP, &restarted) })
		require.Equal(t, 1, sweep(base.UnixMilli()+100, 10), "the stale entry")
		view(t, s, func(tx *storage.Tx) error {
			_, err := tx.Run(projectP, "wfr_20")
			require.NoError(t, err, "a live run is kept")
			return nil
		})
		restarted.State, restarted.EndedAt = storage.RunFailed, base.UnixMilli()+200
		update(t, s, func(tx *storage.Tx) error { return tx.PutRun(projectP, &restarted) })
		require.Zero(t, sweep(base.UnixMilli()+200, 10))
		require.Equal(t, 1, sweep(base.UnixMilli()+201, 10))
		view(t, s, func(tx *storage.Tx) error {
			_, err := tx.Run(projectP, "wfr_20")
			require.ErrorIs(t, err, storage.ErrNotFound)
			_, err = tx.Run(projectP, "wfr_live")
			require.NoError(t, err, "a live run is never swept")
			return nil
		})
	},
	// Old live runs, more than a sweep takes at once, do not hide an ended run behind
	// them: the sweep reaches ended runs only.
	"OldLiveRunsDoNotStopRunRetention": func(t *testing.T, s *storage.Store) {
		update(t, s, func(tx *storage.Tx) error {
			for i := range 1200 {
				r := &storage.Run{ID: fmt.Sprintf("wfr_live%04d", i), URL: "https://example.com/wf", CreatedAt: base.UnixMilli() - 10_000 + int64(i), State: storage.RunStarted}
				if err := tx.PutRun(projectP, r); err != nil {
					return err
				}
				if err := tx.IndexRun(projectP, r); err != nil {
					return err
				}
			}
			return putRunWithData(tx, &storage.Run{ID: "wfr_ended", URL: "https://example.com/wf", CreatedAt: base.UnixMilli() - 5000, EndedAt: base.UnixMilli() - 4000, State: storage.RunCanceled})
		})
		var n int
		update(t, s, func(tx *storage.Tx) (err error) {
			n, err = tx.DeleteRunsEndedBefore(projectP, base.UnixMilli(), 1000)
			return err
		})
		require.Equal(t, 1, n)
		view(t, s, func(tx *storage.Tx) error {
			_, err := tx.Run(projectP, "wfr_ended")
			require.ErrorIs(t, err, storage.ErrNotFound)
			return nil
		})
	},
	// A dedup record put again with a later expiry leaves a stale index entry, which the
	// sweep removes alone at the old expiry, keeping the record.
	"DedupPutAgain": func(t *testing.T, s *storage.Store) {
		now := base.UnixMilli()
		update(t, s, func(tx *storage.Tx) error {
			return tx.PutDedup(projectP, "d", &storage.DedupRecord{MessageID: "m1", ExpiresAt: now})
		})
		update(t, s, func(tx *storage.Tx) error {
			return tx.PutDedup(projectP, "d", &storage.DedupRecord{MessageID: "m2", ExpiresAt: now + 50})
		})
		var n int
		update(t, s, func(tx *storage.Tx) (err error) { n, err = tx.DeleteExpiredDedup(projectP, now+1, 10); return err })
		require.Equal(t, 1, n, "the stale entry")
		view(t, s, func(tx *storage.Tx) error {
			r, err := tx.Dedup(projectP, "d")
			require.NoError(t, err)
			require.Equal(t, "m2", r.MessageID)
			return nil
		})
		update(t, s, func(tx *storage.Tx) (err error) { n, err = tx.DeleteExpiredDedup(projectP, now+51, 10); return err })
		require.Equal(t, 1, n)
		view(t, s, func(tx *storage.Tx) error {
			_, err := tx.Dedup(projectP, "d")
			require.ErrorIs(t, err, storage.ErrNotFound)
			return nil
		})
	},
}

// putRunWithData stores r (indexed) with two history entries, a step key and a pending
// message link.

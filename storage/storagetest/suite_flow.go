package storagetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// Flow state (rate logs, key settings), gate states, native buffers, runs.

var flowTests = map[string]func(*testing.T, *storage.Store){
	// A rate log keeps each key's starts within the period, oldest first, forgets the
	// older ones as new starts arrive, and never touches a key it prefixes.
	"RateLog": func(t *testing.T, s *storage.Store) {
		const period = int64(time.Second)
		at := func(ms int64) int64 { return base.UnixNano() + ms*int64(time.Millisecond) }
		update(t, s, func(tx *storage.Tx) error {
			for _, st := range []struct {
				key string
				ms  int64
			}{{"k", 0}, {"k", 400}, {"kk", 0}, {"k", 900}, {"kk", 100}} {
				if err := tx.AppendRateStart(projectP, st.key, at(st.ms), period); err != nil {
					return err
				}
			}
			return nil
		})
		update(t, s, func(tx *storage.Tx) error { return tx.AppendRateStart(projectP, "k", at(1400), period) })
		view(t, s, func(tx *storage.Tx) error {
			got, err := tx.RateStarts(projectP)
			require.NoError(t, err)
			require.Equal(t, map[string][]int64{"k": {at(900), at(1400)}, "kk": {at(0), at(100)}}, got,
				"starts at or before start-period are forgotten (400 = 1400-1000 included)")
			other, err := tx.RateStarts(projectQ)
			require.NoError(t, err)
			require.Empty(t, other)
			return nil
		})
		update(t, s, func(tx *storage.Tx) error { return tx.ResetRate(projectP, "k") })
		view(t, s, func(tx *storage.Tx) error {
			got, err := tx.RateStarts(projectP)
			require.NoError(t, err)
			require.Equal(t, map[string][]int64{"kk": {at(0), at(100)}}, got)
			return nil
		})
	},
	// Key settings are stored per key; zero settings remove the record.
	"FlowKeySettings": func(t *testing.T, s *storage.Store) {
		update(t, s, func(tx *storage.Tx) error {
			if err := tx.PutFlowKey(projectP, "a", storage.FlowKeySettings{Paused: true}); err != nil {
				return err
			}
			if err := tx.PutFlowKey(projectP, "b", storage.FlowKeySettings{Pins: flowctl.Pins{Parallelism: 3}}); err != nil {
				return err
			}
			return tx.PutFlowKey(projectP, "c", storage.FlowKeySettings{Paused: true})
		})
		update(t, s, func(tx *storage.Tx) error { return tx.PutFlowKey(projectP, "c", storage.FlowKeySettings{}) })
		view(t, s, func(tx *storage.Tx) error {
			got, err := tx.FlowKeys(projectP)
			require.NoError(t, err)
			require.Equal(t, map[string]storage.FlowKeySettings{"a": {Paused: true}, "b": {Pins: flowctl.Pins{Parallelism: 3}}}, got)
			return nil
		})
	},
}

var gateTests = map[string]func(*testing.T, *storage.Store){
	// GCRA gate states: read back, the busy ones at a time listed, a prefix removed.
	"GCRAStates": func(t *testing.T, s *storage.Store) {
		now := base.UnixNano()
		update(t, s, func(tx *storage.Tx) error {
			for key, tat := range map[string]int64{"wf\x00a": now + 1, "wf\x00b": now, "wf2\x00a": now + int64(time.Hour), "x": now - 1} {
				if err := tx.PutGate(projectP, key, &storage.GateState{ExpiresAt: time.Unix(0, tat).UnixMilli(), GCRA: flowctl.GCRA{TAT: tat}}); err != nil {
					return err
				}
			}
			return nil
		})
		view(t, s, func(tx *storage.Tx) error {
			busy, err := tx.BusyGCRAs(projectP, now)
			require.NoError(t, err)
			require.Equal(t, map[string]flowctl.GCRA{"wf\x00a": {TAT: now + 1}, "wf2\x00a": {TAT: now + int64(time.Hour)}}, busy, "busy: TAT after now")
			st, err := tx.Gate(projectP, "x")
			require.NoError(t, err)
			require.Equal(t, now-1, st.GCRA.TAT)
			_, err = tx.Gate(projectQ, "x")
			require.ErrorIs(t, err, storage.ErrNotFound)
			return nil
		})
		update(t, s, func(tx *storage.Tx) error { return tx.DeleteGatesWithPrefix(projectP, "wf\x00") })
		view(t, s, func(tx *storage.Tx) error {
			var keys []string
			_, err := tx.ForEachGate(projectP, "", 10, func(key string, _ *storage.GateState) bool { keys = append(keys, key); return true })
			require.NoError(t, err)
			require.Equal(t, []string{"wf2\x00a", "x"}, keys)
			return nil
		})
	},
	// Expired gate states are swept, at most limit per call; a singleton holder record is
	// swept once its run has ended or is gone, and kept while the run is live.
	"ExpirySweep": func(t *testing.T, s *storage.Store) {
		nowMs := base.UnixMilli()
		far := nowMs + int64(time.Hour/time.Millisecond)
		update(t, s, func(tx *storage.Tx) error {
			for _, r := range []*storage.Run{{ID: "live", State: storage.RunStarted}, {ID: "ended", State: storage.RunSuccess}} {
				if err := tx.PutRun(projectP, r); err != nil {
					return err
				}
			}
			for key, st := range map[string]storage.GateState{
				"e1": {ExpiresAt: nowMs - 1}, "e2": {ExpiresAt: nowMs - 2}, "e3": {ExpiresAt: nowMs - 3}, "edge": {ExpiresAt: nowMs},
				"s-live": {ExpiresAt: far, RunID: "live"}, "s-ended": {ExpiresAt: far, RunID: "ended"}, "s-gone": {ExpiresAt: far, RunID: "gone"},
			} {
				if err := tx.PutGate(projectP, key, &st); err != nil {
					return err
				}
			}
			return nil
		})
		total := 0
		for range 4 {
			var n int
			update(t, s, func(tx *storage.Tx) (err error) { n, err = tx.DeleteExpiredGates(projectP, nowMs, 2); return err })
			require.LessOrEqual(t, n, 2)
			total += n
		}
		require.Equal(t, 5, total)
		view(t, s, func(tx *storage.Tx) error {
			var keys []string
			truncated, err := tx.ForEachGate(projectP, "", 10, func(key string, _ *storage.GateState) bool { keys = append(keys, key); return true })
			require.NoError(t, err)
			require.False(t, truncated)
			require.Equal(t, []string{"edge", "s-live"}, keys)
			return nil
		})
	},
	// A token bucket's state and its ended runs' statistics are kept in its gate record.
	"TokenBuckets": func(t *testing.T, s *storage.Store) {
		now := base
		update(t, s, func(tx *storage.Tx) error {
			if err := tx.PutTokenBucket(projectP, "tok\x00a", storage.TokenBucket{TAT: now.Add(time.Minute).UnixNano(), Runs: 4, RunTokens: 1000}, now); err != nil {
				return err
			}
			return tx.PutTokenBucket(projectP, "tok\x00b", storage.TokenBucket{TAT: now.UnixNano()}, now)
		})
		view(t, s, func(tx *storage.Tx) error {
			b, err := tx.TokenBucket(projectP, "tok\x00a")
			require.NoError(t, err)
			require.Equal(t, storage.TokenBucket{TAT: now.Add(time.Minute).UnixNano(), Runs: 4, RunTokens: 1000}, b)
			require.Equal(t, int64(250), b.Average())
			b, err = tx.TokenBucket(projectP, "tok\x00none")
			require.NoError(t, err)
			require.Zero(t, b)
			avg, err := tx.TokenAverages(projectP)
			require.NoError(t, err)
			require.Equal(t, map[string]int64{"tok\x00a": 250}, avg)
			busy, err := tx.BusyGCRAs(projectP, now.UnixNano())
			require.NoError(t, err)
			require.Len(t, busy, 1)
			return nil
		})
		var n int
		update(t, s, func(tx *storage.Tx) (err error) {
			n, err = tx.DeleteExpiredGates(projectP, now.Add(29*24*time.Hour).UnixMilli(), 10)
			return err
		})
		require.Zero(t, n, "token statistics are kept for a while after the bucket is full")
	},
}

// buffer is a debounce or batch buffer with events named after ids.
func buffer(gate string, first, deadline int64, ids ...string) *storage.GateBuffer {
	b := &storage.GateBuffer{Workflow: "wf", Gate: gate, FirstAt: first, Deadline: deadline, Received: len(ids)}
	for _, id := range ids {
		b.Events = append(b.Events, storage.BufferedEvent{ID: id, Name: "ev", Data: json.RawMessage(`{"id":"` + id + `"}`), Ts: first})
	}
	return b
}

var bufferTests = map[string]func(*testing.T, *storage.Store){
	// Buffers are found by deadline, earliest first, at or before now; a debounce that
	// moves its deadline is found at the new one only and keeps the last payload; a
	// batch keeps its events in order; a flushed buffer is gone from both.
	"DeadlineIndex": func(t *testing.T, s *storage.Store) {
		now := base.UnixMilli()
		update(t, s, func(tx *storage.Tx) error {
			if err := tx.PutGateBuffer(projectP, "wf\x00deb", buffer("debounce", now, now+100, "e1")); err != nil {
				return err
			}
			if err := tx.PutGateBuffer(projectP, "wf\x00bat", buffer("batch", now, now+50, "b1", "b2")); err != nil {
				return err
			}
			return tx.PutGateBuffer(projectP, "wf2\x00bat", buffer("batch", now, now+10, "c1"))
		})
		update(t, s, func(tx *storage.Tx) error {
			b, err := tx.GateBuffer(projectP, "wf\x00deb")
			if err != nil {
				return err
			}
			last := buffer("debounce", b.FirstAt, now+300, "e2")
			last.Received = b.Received + 1
			return tx.PutGateBuffer(projectP, "wf\x00deb", last)
		})
		view(t, s, func(tx *storage.Tx) error {
			due, err := tx.DueGateBuffers(projectP, now+100, 10)
			require.NoError(t, err)
			require.Equal(t, []string{"wf2\x00bat", "wf\x00bat"}, due, "the debounce moved to +300")
			due, err = tx.DueGateBuffers(projectP, now+300, 2)
			require.NoError(t, err)
			require.Equal(t, []string{"wf2\x00bat", "wf\x00bat"}, due, "at most limit")
			due, err = tx.DueGateBuffers(projectP, now+50, 10)
			require.NoError(t, err)
			require.Equal(t, []string{"wf2\x00bat", "wf\x00bat"}, due, "a deadline at now is due")
			due, err = tx.DueGateBuffers(projectP, now+9, 10)
			require.NoError(t, err)
			require.Empty(t, due)
			next, ok := tx.NextGateBufferDeadline(projectP)
			require.True(t, ok)
			require.Equal(t, now+10, next)
			deb, err := tx.GateBuffer(projectP, "wf\x00deb")
			require.NoError(t, err)
			require.Equal(t, 2, deb.Received)
			require.Equal(t, "e2", deb.Events[0].ID)
			require.Len(t, deb.Events, 1, "a debounce keeps the last payload")
			bat, err := tx.GateBuffer(projectP, "wf\x00bat")
			require.NoError(t, err)
			require.Equal(t, []string{"b1", "b2"}, []string{bat.Events[0].ID, bat.Events[1].ID})
			return nil
		})
		update(t, s, func(tx *storage.Tx) error {
			if err := tx.DeleteGateBuffer(projectP, "wf2\x00bat"); err != nil {
				return err
			}
			return tx.DeleteGateBuffer(projectP, "never")
		})
		view(t, s, func(tx *storage.Tx) error {
			due, err := tx.DueGateBuffers(projectP, now+1000, 10)
			require.NoError(t, err)
			require.Equal(t, []string{"wf\x00bat", "wf\x00deb"}, due)
			_, err = tx.GateBuffer(projectP, "wf2\x00bat")
			require.ErrorIs(t, err, storage.ErrNotFound)
			return nil
		})
		update(t, s, func(tx *storage.Tx) error { return tx.DeleteGateBuffersWithPrefix(projectP, "wf\x00") })
		view(t, s, func(tx *storage.Tx) error {
			_, ok := tx.NextGateBufferDeadline(projectP)
			require.False(t, ok)
			bufs, err := tx.GateBuffers(projectP)
			require.NoError(t, err)
			require.Empty(t, bufs)
			return nil
		})
	},
}

var runTests = map[string]func(*testing.T, *storage.Store){
	// A run's record, cursor, history and step keys: appended, read back, reset from a
	// point; the cursor record alone updates the length.
	"HistoryAndStepKeys": func(t *testing.T, s *storage.Store) {
		r := &storage.Run{ID: "wfr_a", URL: "https://example.com/wf", CreatedAt: base.UnixMilli(), State: storage.RunStarted, Retries: 3}
		other := &storage.Run{ID: "wfr_a2", URL: "https://example.com/wf", CreatedAt: base.UnixMilli(), State: storage.RunStarted}
		update(t, s, func(tx *storage.Tx) error {
			if err := tx.PutRun(projectP, r); err != nil {
				return err
			}
			if err := putRunWithData(tx, other); err != nil {
				return err
			}
			for i := range 5 {
				if err := tx.PutHistory(projectP, r.ID, i, &storage.HistoryEntry{MessageID: fmt.Sprint("msg_", i), Body: fmt.Appendf(nil, "step %d", i), CallType: storage.CallStep, CreatedAt: int64(i)}); err != nil {
					return err
				}
				if err := tx.PutStepKey(projectP, r.ID, fmt.Sprint("s", i), fmt.Sprint("msg_", i)); err != nil {
					return err
				}
			}
			cur := *r
			cur.HistoryLen, cur.HistoryBytes = 5, 30
			return tx.PutRunCursor(projectP, &cur)
		})
		view(t, s, func(tx *storage.Tx) error {
			got, err := tx.Run(projectP, r.ID)
			require.NoError(t, err)
			require.Equal(t, 5, got.HistoryLen)
			require.Equal(t, int64(30), got.HistoryBytes)
			require.Equal(t, 3, got.Retries)
			h, err := tx.History(projectP, r.ID, 3)
			require.NoError(t, err)
			require.Len(t, h, 3)
			require.Equal(t, "step 2", string(h[2].Body))
			id, ok := tx.StepMessage(projectP, r.ID, "s4")
			require.True(t, ok)
			require.Equal(t, "msg_4", id)
			return nil
		})
		update(t, s, func(tx *storage.Tx) error {
			if err := tx.DeleteHistoryFrom(projectP, r.ID, 2); err != nil {
				return err
			}
			return tx.DeleteStepKeys(projectP, r.ID)
		})
		view(t, s, func(tx *storage.Tx) error {
			h, err := tx.History(projectP, r.ID, 5)
			require.NoError(t, err)
			require.Len(t, h, 2, "entries from 2 on were removed")
			_, ok := tx.StepMessage(projectP, r.ID, "s0")
			require.False(t, ok)
			h, err = tx.History(projectP, other.ID, 5)
			require.NoError(t, err)
			require.Len(t, h, 2, "a run whose id extends this one's keeps its history")
			_, ok = tx.StepMessage(projectP, other.ID, "step-a")
			require.True(t, ok)
			return nil
		})
	},
	// Runs list newest first by creation time through the index, page with a cursor,
	// and skip index entries whose run is missing.
	"ListRunsPaging": func(t *testing.T, s *storage.Store) {
		update(t, s, func(tx *storage.Tx) error {
			for i := range 7 {
				r := &storage.Run{ID: fmt.Sprintf("wfr_%d", i), CreatedAt: base.UnixMilli() + int64(i/2), State: storage.RunStarted}
				if err := tx.PutRun(projectP, r); err != nil {
					return err
				}
				if err := tx.IndexRun(projectP, r); err != nil {
					return err
				}
			}
			return tx.IndexRun(projectP, &storage.Run{ID: "wfr_missing", CreatedAt: base.UnixMilli() + 1})
		})
		var got []string
		var after *storage.RunCursor
		for pages := 0; ; pages++ {
			require.Less(t, pages, 10)
			var rs []storage.Run
			var next *storage.RunCursor
			view(t, s, func(tx *storage.Tx) (err error) {
				rs, next, err = tx.ListRuns(projectP, after, 3, func(r *storage.Run) bool { return r.ID != "wfr_3" })
				return err
			})
			got = append(got, runIDs(rs)...)
			if next == nil {
				break
			}
			after = next
		}
		require.Equal(t, []string{"wfr_6", "wfr_5", "wfr_4", "wfr_2", "wfr_1", "wfr_0"}, got)
		update(t, s, func(tx *storage.Tx) error {
			return tx.UnindexRun(projectP, &storage.Run{ID: "wfr_6", CreatedAt: base.UnixMilli() + 3})
		})
		view(t, s, func(tx *storage.Tx) error {
			rs, _, err := tx.ListRuns(projectP, nil, 1, all)
			require.NoError(t, err)
			require.Equal(t, []string{"wfr_5"}, runIDs(rs))
			var ids []string
			require.NoError(t, tx.ForEachRun(projectP, func(r *storage.Run) bool { ids = append(ids, r.ID); return true }))
			require.Len(t, ids, 7, "the run record stays; only its index entry went")
			return nil
		})
	},
	// Waiters of an event are listed in run order up to a count and a byte budget, and
	// never those of an event whose id the first prefixes; links of a run's pending
	// messages come and go.
	"WaitersAndLinks": func(t *testing.T, s *storage.Store) {
		update(t, s, func(tx *storage.Tx) error {
			for _, w := range []storage.Waiter{{EventID: "ev", RunID: "r2"}, {EventID: "ev", RunID: "r1"}, {EventID: "ev2", RunID: "r0"}, {EventID: "ev", RunID: "r3", Step: []byte(`"big"`)}} {
				if err := tx.PutWaiter(projectP, &w); err != nil {
					return err
				}
			}
			for _, id := range []string{"m2", "m1", "m3"} {
				if err := tx.LinkRunMessage(projectP, "r1", id); err != nil {
					return err
				}
			}
			return tx.UnlinkRunMessage(projectP, "r1", "m2")
		})
		update(t, s, func(tx *storage.Tx) error { return tx.DeleteWaiter(projectP, "ev", "r2") })
		view(t, s, func(tx *storage.Tx) error {
			ws, err := tx.Waiters(projectP, "ev", 10, 0)
			require.NoError(t, err)
			require.Equal(t, []string{"r1", "r3"}, []string{ws[0].RunID, ws[1].RunID})
			require.Len(t, ws, 2)
			ws, err = tx.Waiters(projectP, "ev", 1, 0)
			require.NoError(t, err)
			require.Len(t, ws, 1)
			ws, err = tx.Waiters(projectP, "ev", 10, 1)
			require.NoError(t, err)
			require.Len(t, ws, 1, "a byte budget of 1 still gives one waiter")
			w, err := tx.Waiter(projectP, "ev2", "r0")
			require.NoError(t, err)
			require.Equal(t, "r0", w.RunID)
			_, err = tx.Waiter(projectP, "ev", "r2")
			require.ErrorIs(t, err, storage.ErrNotFound)
			links, err := tx.RunMessages(projectP, "r1")
			require.NoError(t, err)
			require.Equal(t, []string{"m1", "m3"}, links)
			return nil
		})
	},
}

package delivery

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// Events kept for a later wait (lookback) are bounded per run, expire, and go with the
// run (issue 14, finding 2).
func TestRunEventsAreCappedExpiredAndDeletedWithTheRun(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	b := setup(t, Config{MaxRunEvents: 2, MaxRunEventBytes: 64, EventRetention: time.Hour, Now: clock})
	ep := sdkEndpoint(t)
	url := ep.url("/wf")
	usage := func(runID string) storage.RunEventUsage {
		t.Helper()
		var u storage.RunEventUsage
		require.NoError(t, b.store.View(func(tx *storage.Tx) error {
			var err error
			u, err = tx.RunEvents(testProject, runID, "")
			return err
		}))
		return u
	}
	resume := func(runID string) *Message {
		return &Message{Project: testProject, URL: url, Method: "POST", RunID: runID, Header: map[string][]string{"Upstash-Workflow-Sdk-Version": {"1"}}}
	}
	wait := func(runID, event string, stepID int) {
		t.Helper()
		step := []byte(`{"stepId":` + string(rune('0'+stepID)) + `,"stepName":"w","stepType":"Wait","concurrent":1}`)
		require.NoError(t, b.engine.Wait(t.Context(), WaitRequest{Project: testProject, EventID: event, RunID: runID, Timeout: 10 * time.Hour, TimeoutText: "10h",
			Step: step, Resume: resume(runID), OnTimeout: resume(runID)}))
	}

	b.trigger(t, url, "wfr_ev", `{}`, nil)
	ep.waitRequests(t, "/wf", 1)

	// Count: two events are kept, a third is refused; replacing a kept one is fine.
	for _, ev := range []string{"e1", "e2", "e1"} {
		_, _, err := b.engine.Notify(t.Context(), testProject, ev, "wfr_ev", []byte("x"))
		require.NoError(t, err, ev)
	}
	_, _, err := b.engine.Notify(t.Context(), testProject, "e3", "wfr_ev", []byte("x"))
	require.ErrorIs(t, err, ErrRunLimit)
	require.Equal(t, storage.RunEventUsage{Count: 2, Bytes: 3 + 3}, usage("wfr_ev"))

	// Bytes: an event that would take the run past 64 bytes is refused, nothing changes.
	_, _, err = b.engine.Notify(t.Context(), testProject, "e2", "wfr_ev", []byte(strings.Repeat("y", 61)))
	require.ErrorIs(t, err, ErrRunLimit)
	require.Equal(t, storage.RunEventUsage{Count: 2, Bytes: 6}, usage("wfr_ev"))

	// Expiry: after the retention a kept event no longer resolves a wait, and the sweep
	// removes what is left.
	offset.Store(int64(2 * time.Hour))
	wait("wfr_ev", "e1", 1)
	ws, err := b.engine.Waiters(t.Context(), testProject, "e1")
	require.NoError(t, err)
	require.Len(t, ws, 1, "an expired event does not resolve the wait")
	require.NoError(t, b.engine.sweep(t.Context()))
	require.Equal(t, storage.RunEventUsage{}, usage("wfr_ev"))
	var left int
	require.NoError(t, b.store.Update(func(tx *storage.Tx) error {
		left, err = tx.DeleteExpiredRunEvents(testProject, clock().UnixMilli(), 100)
		return err
	}))
	require.Zero(t, left, "the expiry index is empty too")

	// Deleted with the run: a cancelled run's kept events are gone at once.
	_, _, err = b.engine.Notify(t.Context(), testProject, "e4", "wfr_ev", []byte("x"))
	require.NoError(t, err)
	require.Equal(t, 1, usage("wfr_ev").Count)
	live, err := b.engine.CancelRun(t.Context(), testProject, "wfr_ev")
	require.NoError(t, err)
	require.True(t, live)
	require.Equal(t, storage.RunEventUsage{}, usage("wfr_ev"))

	// A run that completes drops them as well.
	b.trigger(t, url, "wfr_ev2", `{}`, nil)
	ep.waitRequests(t, "/wf", 2)
	_, _, err = b.engine.Notify(t.Context(), testProject, "e5", "wfr_ev2", []byte("x"))
	require.NoError(t, err)
	require.NoError(t, b.engine.CompleteRun(t.Context(), testProject, "wfr_ev2", nil, false))
	require.Equal(t, storage.RunEventUsage{}, usage("wfr_ev2"))
}

package delivery

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every listing stops at the engine's byte budget and continues through its cursor
// (issue 14, finding 3). With a budget of one byte every page holds one record.
func TestListingsStopAtTheByteBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{MaxPageBytes: 1})
	ep := sdkEndpoint(t)
	url := ep.url("/wf")
	for _, id := range []string{"wfr_p1", "wfr_p2", "wfr_p3"} {
		b.trigger(t, url, id, `{"some":"payload"}`, nil)
	}
	ep.waitRequests(t, "/wf", 3)

	var cursor *RunCursor
	var seen []string
	for range 10 {
		runs, next, err := b.engine.Runs(t.Context(), testProject, cursor, 100, func(*Run) bool { return true })
		require.NoError(t, err)
		require.Len(t, runs, 1)
		seen = append(seen, runs[0].ID)
		if cursor = next; cursor == nil {
			break
		}
	}
	require.ElementsMatch(t, []string{"wfr_p1", "wfr_p2", "wfr_p3"}, seen)

	logs, next, err := b.engine.Logs(t.Context(), testProject, "", 100, func(*LogEvent) bool { return true })
	require.NoError(t, err)
	require.Len(t, logs, 1)
	require.NotEmpty(t, next)

	for _, id := range []string{"wfr_p1", "wfr_p2"} {
		resume := &Message{Project: testProject, URL: url, Method: "POST", RunID: id}
		require.NoError(t, b.engine.Wait(t.Context(), WaitRequest{Project: testProject, EventID: "evt", RunID: id, Timeout: time.Hour,
			Step: []byte(`{"stepId":1,"stepName":"w","stepType":"Wait","concurrent":1}`), Resume: resume, OnTimeout: resume}))
	}
	ws, err := b.engine.Waiters(t.Context(), testProject, "evt")
	require.NoError(t, err)
	require.Len(t, ws, 1)
	res, _, err := b.engine.Notify(t.Context(), testProject, "evt", "", []byte("x"))
	require.NoError(t, err)
	require.Len(t, res, 2, "a notify still resolves every waiter")
}

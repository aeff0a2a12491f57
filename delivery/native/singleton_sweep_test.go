package native

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/storage"
)

// TestSweepRemovesEndedSingletonHolders: a singleton scope's holder record goes once its
// run has ended (here: cancelled), so one record per key value ever seen does not stay
// forever; a live holder's stays and still skips, and an ended scope starts a new run.
func TestSweepRemovesEndedSingletonHolders(t *testing.T) {
	ep := &endpoint{}
	c := &clock{}
	c.ns.Store(time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	n := openWith(t, t.TempDir(), ep, c, delivery.Config{SweepInterval: time.Millisecond})
	defer n.close(t)
	n.register(t, "app", `{"workflows": [{"name": "wf", "url": "http://x.test/wf", "triggers": [{"event": "e"}],
		"singleton": {"key": "user", "mode": "skip"}}]}`)
	res := n.send(t, ev("e", `{"user": "a"}`, ""), ev("e", `{"user": "b"}`, ""))
	runA, runB := res[0].Runs[0].RunID, res[1].Runs[0].RunID
	require.NotEmpty(t, runA)
	require.NotEmpty(t, runB)

	holder := func(user string) string {
		var id string
		require.NoError(t, n.store.View(func(tx *storage.Tx) error {
			st, err := tx.Gate(project, gateKey("wf", gateSingleton, `"`+user+`"`))
			if errors.Is(err, storage.ErrNotFound) {
				return nil
			}
			if err == nil {
				id = st.RunID
			}
			return err
		}))
		return id
	}
	require.Equal(t, runA, holder("a"))
	require.Equal(t, runB, holder("b"))

	_, err := n.svc.CancelRun(t.Context(), project, runA)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return holder("a") == "" }, 10*time.Second, time.Millisecond,
		"the ended run's holder record is swept")
	require.Equal(t, runB, holder("b"), "a live holder stays")

	again := n.send(t, ev("e", `{"user": "b"}`, ""), ev("e", `{"user": "a"}`, ""))
	require.True(t, again[0].Runs[0].Skipped)
	require.Equal(t, runB, again[0].Runs[0].HolderRunID)
	require.NotEmpty(t, again[1].Runs[0].RunID, "scope a is free")
	require.Equal(t, again[1].Runs[0].RunID, holder("a"))
}

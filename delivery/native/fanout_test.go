package native

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/storage"
)

// TestEventRunBudget: a request whose fan-out is over MaxRunsPerRequest stores nothing;
// one that finds its project's in-flight budget taken is ErrBusy, while another project
// and the project itself after the release go through.
func TestEventRunBudget(t *testing.T) {
	c := &clock{}
	c.ns.Store(time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	n := open(t, t.TempDir(), &endpoint{}, c)
	defer n.close(t)
	n.svc.cfg.MaxRunsPerRequest, n.svc.runs = 4, newRunBudget(5)
	var wfs []string
	for i := range 3 {
		wfs = append(wfs, fmt.Sprintf(`{"name": "w%d", "url": "http://x.test/%d", "triggers": [{"event": "fan"}], "throttle": {"limit": 1, "perMs": 3600000}}`, i, i))
	}
	n.register(t, "app", `{"workflows": [`+strings.Join(wfs, ",")+`]}`)

	_, err := n.svc.SendEvents(context.Background(), project, []EventIn{ev("fan", "1", ""), ev("fan", "2", "")})
	require.ErrorIs(t, err, ErrTooManyRuns)
	require.ErrorContains(t, err, "up to 6 workflow runs")
	events, _, err := n.svc.Events(context.Background(), project, "", "", 10)
	require.NoError(t, err)
	require.Empty(t, events, "the refused request stored nothing")

	release, err := n.svc.runs.take(project, 3)
	require.NoError(t, err)
	_, err = n.svc.SendEvents(context.Background(), project, []EventIn{ev("fan", "1", "")})
	require.ErrorIs(t, err, ErrBusy)
	require.ErrorContains(t, err, "the limit in flight is 5")
	_, err = n.svc.SendEvents(context.Background(), project, []EventIn{ev("nobody", "1", "")})
	require.NoError(t, err, "an event that starts no run needs no budget")
	other, err := n.svc.runs.take("another", 5)
	require.NoError(t, err, "each project has its own budget")
	other()
	release()
	res := n.send(t, ev("fan", "1", ""))
	require.Len(t, res[0].Runs, 3)
	require.Empty(t, n.svc.runs.used, "every reservation was given back")

	// TriggerCount counts what TriggeredBy would read.
	require.NoError(t, n.store.View(func(tx *storage.Tx) error {
		got, err := tx.TriggerCount(project, "fan")
		require.Equal(t, 3, got)
		return err
	}))
}

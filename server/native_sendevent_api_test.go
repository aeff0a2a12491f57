package server

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

// TestNativeGoSDKSendEventStep: sdk.SendEvent publishes events as a recorded step. The
// route is replayed once per later step; every replay gets the recorded ids back and
// sends nothing again: the sent event is stored once and starts its workflow once.
func TestNativeGoSDKSendEventStep(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	var (
		mu      sync.Mutex
		seenIDs [][]string
	)
	done := make(chan struct{}, 1)
	parent := app.mount("/parent", func(c *sdk.Context) (any, error) {
		ids, err := sdk.SendEvent(c, "emit",
			sdk.Event{Name: "child", Data: map[string]int{"n": 1}},
			sdk.Event{Name: "child", Data: map[string]int{"n": 2}, DedupeID: "mine"})
		if err != nil {
			return nil, err
		}
		mu.Lock()
		seenIDs = append(seenIDs, ids)
		mu.Unlock()
		for _, step := range []string{"a", "b", "c"} {
			if err := c.Sleep(step, time.Millisecond); err != nil {
				return nil, err
			}
		}
		done <- struct{}{}
		return nil, nil
	})
	childRuns := make(chan string, 8)
	child := app.mount("/child", func(c *sdk.Context) (any, error) {
		return sdk.Run(c, "seen", func() (bool, error) {
			ev, _ := c.Event()
			childRuns <- ev.ID
			return true, nil
		})
	})
	client, err := sdk.NewClient(sdk.WithBaseURL(env.URL), sdk.WithToken(env.Token))
	require.NoError(t, err)
	ctx := context.Background()
	a, err := sdk.NewApp("shop", "", []sdk.Workflow{
		{Name: "parent", URL: parent, Triggers: []string{"order"}},
		{Name: "child", URL: child, Triggers: []string{"child"}},
	})
	require.NoError(t, err)
	_, err = client.RegisterApp(ctx, a)
	require.NoError(t, err)
	_, err = client.SendEvent(ctx, sdk.Event{Name: "order", Data: map[string]string{"id": "o1"}})
	require.NoError(t, err)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the parent run did not finish")
	}

	mu.Lock()
	require.GreaterOrEqual(t, len(seenIDs), 4, "the route ran once per step: %v", seenIDs)
	for _, ids := range seenIDs {
		require.Equal(t, seenIDs[0], ids, "every replay returns the recorded ids")
	}
	first := seenIDs[0]
	mu.Unlock()
	require.Len(t, first, 2)

	got := map[string]bool{}
	for range 2 {
		select {
		case id := <-childRuns:
			got[id] = true
		case <-time.After(30 * time.Second):
			t.Fatal("a sent event did not start its run")
		}
	}
	require.Equal(t, map[string]bool{first[0]: true, first[1]: true}, got)
	r := env.call(t, http.MethodGet, "/events?name=child", nil)
	require.Equal(t, http.StatusOK, r.Status)
	events := decodeJSON[struct{ Events []struct{ ID string } }](t, r).Events
	require.Len(t, events, 2, "sent once: %s", r.Body)
	select {
	case id := <-childRuns:
		t.Fatalf("a second child run for %s", id)
	case <-time.After(200 * time.Millisecond):
	}
}

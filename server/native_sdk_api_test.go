package server

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

// TestNativeGoSDK: the Go SDK registers an app, sends events with typed per-workflow
// results, and a route reads the native run's event with c.Event() / c.Events().
func TestNativeGoSDK(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	app := newSDKApp(t, env)
	type seen struct {
		ev       sdk.ReceivedEvent
		ok       bool
		events   int
		workflow string
		app      string
		user     string
	}
	got := make(chan seen, 8)
	url := app.mount("/sync", func(c *sdk.Context) (any, error) {
		ev, ok := c.Event()
		var data struct{ User string }
		if ok {
			if err := ev.Decode(&data); err != nil {
				return nil, err
			}
		}
		return sdk.Run(c, "record", func() (bool, error) {
			got <- seen{ev: ev, ok: ok, events: len(c.Events()), workflow: c.Workflow(), app: c.App(), user: data.User}
			return true, nil
		})
	})
	client, err := sdk.NewClient(sdk.WithBaseURL(env.URL), sdk.WithToken(env.Token))
	require.NoError(t, err)
	ctx := context.Background()

	retries := 1
	accounts, err := sdk.NewApp("accounts", "", []sdk.Workflow{
		{Name: "sync", URL: url, Triggers: []string{"user.created"}, Retries: &retries},
		{Name: "limited", URL: url, Triggers: []string{"user.created"},
			RateLimit: &sdk.Rate{Limit: 1, PerMs: 60_000}, Concurrency: []sdk.Concurrency{{Limit: 3, Key: "user"}}},
	})
	require.NoError(t, err)
	reg, err := client.RegisterApp(ctx, accounts)
	require.NoError(t, err)
	require.Equal(t, "accounts", reg.Name)
	require.Len(t, reg.Workflows, 2)
	require.Equal(t, "sync", reg.Workflows[0].Name)
	require.Equal(t, 1, reg.Workflows[0].Retries)
	require.Equal(t, "limited", reg.Workflows[1].Name)
	require.Equal(t, []string{"user.created"}, reg.Workflows[1].TriggerEvents())
	require.Equal(t, &sdk.Rate{Limit: 1, PerMs: 60_000}, reg.Workflows[1].FlowControl.RateLimit)
	require.Equal(t, []sdk.Concurrency{{Limit: 3, Key: "user"}}, reg.Workflows[1].FlowControl.Concurrency)

	res, err := client.SendEvents(ctx, []sdk.Event{
		{Name: "user.created", Data: map[string]string{"user": "ann"}, DedupeID: "u-ann"},
		{Name: "user.created", Data: map[string]string{"user": "bob"}},
		{Name: "user.created", Data: map[string]string{"user": "ann"}, DedupeID: "u-ann"},
	})
	require.NoError(t, err)
	require.Len(t, res, 3)
	first, ok := res[0].Run("sync")
	require.True(t, ok)
	require.True(t, first.Started())
	lim, _ := res[0].Run("limited")
	require.True(t, lim.Started())
	lim, _ = res[1].Run("limited")
	require.True(t, lim.Dropped, "rateLimit 1 per minute: the second event is dropped")
	require.False(t, lim.Started())
	require.True(t, res[2].Deduped)
	require.Equal(t, res[0].ID, res[2].ID, "a repeated dedupeId answers the first event's id")
	require.Empty(t, res[2].Runs)
	_, ok = res[2].Run("sync")
	require.False(t, ok)

	// Three runs started (sync twice, limited once); each saw its own event.
	byUser := map[string]int{}
	for range 3 {
		s := <-got
		require.True(t, s.ok)
		require.Equal(t, "user.created", s.ev.Name)
		require.Equal(t, 1, s.events)
		require.Equal(t, "accounts", s.app)
		require.Contains(t, []string{"sync", "limited"}, s.workflow)
		require.NotZero(t, s.ev.Time())
		byUser[s.user]++
		if s.user == "ann" {
			require.Equal(t, res[0].ID, s.ev.ID)
		} else {
			require.Equal(t, res[1].ID, s.ev.ID)
		}
	}
	require.Equal(t, map[string]int{"ann": 2, "bob": 1}, byUser)

	// A bad definition is an APIError naming the workflow and field; nothing changed.
	bad, err := sdk.NewApp("accounts", "", []sdk.Workflow{{Name: "sync", URL: url, Triggers: []string{"x"},
		RateLimit: &sdk.Rate{Limit: 0, PerMs: 60_000}}})
	require.NoError(t, err)
	_, err = client.RegisterApp(ctx, bad)
	var apiErr *sdk.APIError
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusBadRequest, apiErr.Status)
	require.Contains(t, apiErr.Message, "rateLimit")
	require.Equal(t, []string{"accounts/limited", "accounts/sync"}, env.workflowNames(t, ""))
	_, err = client.SendEvents(ctx, nil)
	require.Error(t, err)
}

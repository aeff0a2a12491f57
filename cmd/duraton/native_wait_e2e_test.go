package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

// TestGoSDKCorrelatedWaitsE2E: against a real duraton process, a Go SDK workflow waits
// with sdk.WaitForEvent(c, ..., sdk.Wait{Match, If}) and declares cancelOn: an
// order.paid wakes only its order's run and only when its amount reaches the order's
// minimum; an order.cancelled cancels only its order's waiting run, says so, and the run
// shows cancelledBy.
func TestGoSDKCorrelatedWaitsE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: runs the duraton binary")
	}
	t.Parallel()
	p := startDuraton(t, t.TempDir())
	httpc := newAPIClient(t, 10*time.Second)
	var (
		mu  sync.Mutex
		got = map[string]string{}
	)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	app, err := sdk.NewApp("shop", srv.URL, []sdk.Workflow{{
		Name:     "fulfil",
		Triggers: []string{"order.placed"},
		CancelOn: []sdk.CancelOn{{Event: "order.cancelled", Match: "data.orderId"}},
		Handler: func(c *sdk.Context) (any, error) {
			res, err := sdk.WaitForEvent(c, "paid", sdk.Wait{Event: "order.paid", Timeout: time.Hour,
				Match: "data.orderId", If: "async.data.amount >= event.data.min"})
			if err != nil {
				return nil, err
			}
			return sdk.Run(c, "record", func() (string, error) {
				mu.Lock()
				defer mu.Unlock()
				got[c.RunID] = string(res.Data)
				return string(res.Data), nil
			})
		},
	}}, sdk.WithServeCredentials(p.URL, p.Token),
		sdk.WithReceiver(&sdk.Receiver{CurrentSigningKey: p.CurrentSigningKey, NextSigningKey: p.NextSigningKey}))
	require.NoError(t, err)
	mux.Handle("/", app)
	client, err := sdk.NewClient(sdk.WithBaseURL(p.URL), sdk.WithToken(p.Token))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = client.RegisterApp(ctx, app)
	require.NoError(t, err)

	status := func(id string) string {
		code, body := nativeCall(t, httpc, p, http.MethodGet, "/runs/"+id, "")
		require.Equal(t, http.StatusOK, code, "%s", body)
		var v struct{ Status string }
		require.NoError(t, json.Unmarshal(body, &v))
		return v.Status
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		require.Eventually(t, cond, 20*time.Second, 20*time.Millisecond, what)
	}
	runs := map[string]string{}
	for _, o := range []string{"o1", "o2", "o3"} {
		res, err := client.SendEvent(ctx, sdk.Event{Name: "order.placed", Data: map[string]any{"orderId": o, "min": 100}})
		require.NoError(t, err)
		r, ok := res.Run("fulfil")
		require.True(t, ok)
		runs[o] = r.RunID
	}
	for o, id := range runs {
		eventually(o+" waits", func() bool { return status(id) == "waiting" })
	}

	_, err = client.SendEvents(ctx, []sdk.Event{
		{Name: "order.paid", Data: map[string]any{"orderId": "o1", "amount": 50}},
		{Name: "order.paid", Data: map[string]any{"orderId": "o2", "amount": 500.5}},
	})
	require.NoError(t, err)
	eventually("o2 succeeds", func() bool { return status(runs["o2"]) == "succeeded" })
	mu.Lock()
	require.JSONEq(t, `{"orderId": "o2", "amount": 500.5}`, got[runs["o2"]])
	mu.Unlock()
	require.Equal(t, "waiting", status(runs["o1"]), "50 is under o1's minimum")
	require.Equal(t, "waiting", status(runs["o3"]))

	res, err := client.SendEvent(ctx, sdk.Event{Name: "order.cancelled", Data: map[string]any{"orderId": "o1"}})
	require.NoError(t, err)
	require.Len(t, res.Cancelled, 1)
	require.Equal(t, "fulfil", res.Cancelled[0].Workflow)
	require.Equal(t, []string{runs["o1"]}, res.Cancelled[0].Cancelled)
	code, body := nativeCall(t, httpc, p, http.MethodGet, "/runs/"+runs["o1"], "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(body), fmt.Sprintf(`"cancelledBy":{"eventId":%q}`, res.ID))
	require.Contains(t, string(body), `"status":"cancelled"`)
	require.Equal(t, "waiting", status(runs["o3"]), "o3 is neither paid nor cancelled")
}

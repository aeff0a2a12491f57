package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/sdk/wire"
)

// TestSDKNativeRunClient: the Go SDK's native run methods against a real server, with a
// workflow app and a client configured only by DURATON_URL and DURATON_TOKEN (no
// QSTASH_URL: the app's steps must still reach this server). The run view decodes into
// the SDK's types with no field left over.
func TestSDKNativeRunClient(t *testing.T) {
	t.Parallel()
	env := newAPI(t, envOptions{})
	vals := map[string]string{"DURATON_URL": env.URL, "DURATON_TOKEN": env.Token,
		"QSTASH_CURRENT_SIGNING_KEY": testCurrentKey, "QSTASH_NEXT_SIGNING_KEY": testNextKey}
	getenv := func(k string) string { return vals[k] }
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	route := func(c *sdk.Context) (any, error) {
		ev, _ := c.Event()
		if _, err := sdk.Run(c, "obj", func() (map[string]int, error) { return map[string]int{"v": 1}, nil }); err != nil {
			return nil, err
		}
		if bytes.Contains(ev.Data, []byte(`"hold"`)) {
			_, err := c.WaitForEvent("hold", "never", time.Hour)
			return nil, err
		}
		return nil, nil
	}
	mux.Handle("/wf", sdk.Serve(route, sdk.WithServeEnv(getenv)))
	client, err := sdk.NewClient(sdk.WithEnv(getenv))
	require.NoError(t, err)
	require.Equal(t, env.URL, client.BaseURL())
	ctx := context.Background()
	env.mustPutApp(t, "app", fmt.Sprintf(`{"workflows": [{"name": "wf", "url": %q, "triggers": [{"event": "e"}]}]}`, srv.URL+"/wf"))

	res, err := client.SendEvents(ctx, []sdk.Event{{Name: "e", Data: json.RawMessage(`{"acct": "a1"}`)},
		{Name: "e", Data: json.RawMessage(`{"acct": "a2", "mode": "hold"}`)}})
	require.NoError(t, err)
	done, held := res[0].Runs[0].RunID, res[1].Runs[0].RunID
	eventually(t, "the first run succeeds", func() bool {
		r, err := client.GetRun(ctx, done)
		return err == nil && r.Status == "succeeded"
	})
	r, err := client.GetRun(ctx, done)
	require.NoError(t, err)
	require.Len(t, r.Steps, 1)
	var out struct{ V int }
	require.NoError(t, sdk.DecodeOut(r.Steps[0], &out))
	require.Equal(t, 1, out.V)

	raw := env.call(t, http.MethodGet, "/runs/"+done, nil)
	d := json.NewDecoder(bytes.NewReader(raw.Body))
	d.DisallowUnknownFields()
	var strict wire.NativeRun
	require.NoError(t, d.Decode(&strict), "the SDK's NativeRun has every field of the view")

	page, err := client.ListRuns(ctx, sdk.RunFilter{Workflow: "wf", Q: `event.data.acct == "a1"`, From: time.Now().Add(-time.Hour)}, "", 10)
	require.NoError(t, err)
	require.Len(t, page.Runs, 1)
	require.Equal(t, done, page.Runs[0].RunID)
	require.Empty(t, page.Cursor)

	eventually(t, "the second run waits", func() bool {
		r, err := client.GetRun(ctx, held)
		return err == nil && r.Status == "waiting"
	})
	stats, err := client.RunStats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, stats.Active)
	fs, err := client.FlowState(ctx, "app", "")
	require.NoError(t, err)
	require.Empty(t, fs.Debounce)

	_, err = client.CancelRuns(ctx, sdk.BulkRuns{})
	require.ErrorContains(t, err, "All")
	b, err := client.CancelRuns(ctx, sdk.BulkRuns{Filter: sdk.RunFilter{Workflow: "wf", EventName: "e"}, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, sdk.BulkRunsResult{Matched: 1}, b, "the live run")
	cancelled, err := client.CancelRun(ctx, held)
	require.NoError(t, err)
	require.Equal(t, "cancelled", cancelled.Status)
	require.True(t, cancelled.Cancelled.API)
	_, err = client.CancelRun(ctx, held)
	var apiErr *sdk.APIError
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, http.StatusConflict, apiErr.Status)
	_, err = client.ReplayRun(ctx, done, nil)
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, http.StatusConflict, apiErr.Status, "only a failed run is replayed")
	b, err = client.ReplayRuns(ctx, sdk.BulkRuns{All: true, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, sdk.BulkRunsResult{}, b, "no failed run")
}

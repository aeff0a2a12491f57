package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

// TestConsoleBrowserSearchAndBulk: the Runs page's search narrows native runs to exactly
// the matching ones (by q over the event, by workflow); bulk cancel first shows the dry
// run's count and changes nothing, and its confirm cancels exactly those runs, checked
// through the API.
func TestConsoleBrowserSearchAndBulk(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: starts the duraton binary and chromium")
	}
	b := newBrowser(t)
	p := startDuraton(t, t.TempDir())
	console := p.URL + "/console"
	ctx := context.Background()
	client, err := sdk.NewClient(sdk.WithBaseURL(p.URL), sdk.WithToken(p.Token),
		sdk.WithHTTPClient(newAPIClient(t, 30*time.Second)), sdk.WithEnv(func(string) string { return "" }))
	require.NoError(t, err)

	// Every run sleeps for an hour: live, and holding no connection.
	mux := http.NewServeMux()
	mux.Handle("/sync", sdk.Serve(func(c *sdk.Context) (any, error) {
		return nil, c.Sleep("hold", time.Hour)
	}, sdk.WithServeCredentials(p.URL, p.Token),
		sdk.WithReceiver(&sdk.Receiver{CurrentSigningKey: p.CurrentSigningKey, NextSigningKey: p.NextSigningKey})))
	ep := httptest.NewServer(mux)
	t.Cleanup(ep.Close)
	req, err := http.NewRequest(http.MethodPut, p.URL+"/apps/crm", strings.NewReader(`{"workflows":[`+
		`{"name":"sync.account","url":"`+ep.URL+`/sync","triggers":[{"event":"account.updated"}]},`+
		`{"name":"sync.invoice","url":"`+ep.URL+`/sync","triggers":[{"event":"invoice.paid"}]}]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+p.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := newAPIClient(t, 10*time.Second).Do(req)
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", out)

	runs := map[string][]string{} // by account, and "invoice"
	for _, key := range []string{"a1", "a2", "a1", "invoice", "a2", "a1", "invoice"} {
		ev := sdk.Event{Name: "account.updated", Data: map[string]string{"accountId": key}}
		if key == "invoice" {
			ev = sdk.Event{Name: "invoice.paid", Data: map[string]string{"invoiceId": "i1"}}
		}
		res, err := client.SendEvent(ctx, ev)
		require.NoError(t, err)
		require.Len(t, res.Runs, 1)
		runs[key] = append(runs[key], res.Runs[0].RunID)
	}
	for _, ids := range runs {
		slices.Sort(ids)
	}
	byStatus := func(status string) []string {
		page, err := client.ListRuns(ctx, sdk.RunFilter{Status: status}, "", 100)
		require.NoError(t, err)
		var ids []string
		for _, r := range page.Runs {
			ids = append(ids, r.RunID)
		}
		slices.Sort(ids)
		return ids
	}
	eventually(t, "all seven runs sleep", func() bool { return len(byStatus("sleeping")) == 7 })
	shown := func() []string {
		ids := eval[[]string](t, b, `Array.from(document.querySelectorAll("#found tr[data-run]")).map(tr => tr.dataset.run)`)
		slices.Sort(ids)
		return ids
	}
	search := func(t *testing.T, workflow, q string) {
		t.Helper()
		eval[string](t, b, fmt.Sprintf(`document.getElementById("workflow").value = %q; document.getElementById("q").value = %q`, workflow, q))
		b.click(t, "#search-button")
	}

	t.Run("SearchNarrows", func(t *testing.T) {
		b.navigate(t, console+"/runs")
		b.waitText(t, "#found caption", "7 matching run(s)") // a project with native workflows opens on them
		search(t, "", `event.data.accountId == "a1"`)
		b.waitText(t, "#found caption", "3 matching run(s)")
		require.Equal(t, runs["a1"], shown())
		require.Contains(t, eval[string](t, b, `location.search`), "q=event.data.accountId")
		search(t, "sync.invoice", "")
		b.waitText(t, "#found caption", "2 matching run(s)")
		require.Equal(t, runs["invoice"], shown())

		// A bad q is refused with the API's reason, on the page.
		search(t, "", `event.data.accountId ==`)
		b.waitText(t, ".error", "q: ")
		require.Zero(t, eval[int](t, b, `document.querySelectorAll("#found").length`), "no results for a refused search")
	})

	t.Run("BulkCancelAsksThenActs", func(t *testing.T) {
		b.navigate(t, console+"/runs")
		search(t, "sync.account", `event.data.accountId == "a1"`)
		b.waitText(t, "#found caption", "3 matching run(s)")
		b.click(t, "#bulk-cancel")
		b.waitText(t, "#bulk-question", "Cancel 3 runs matching workflow = sync.account, q = event.data.accountId == \"a1\"?")
		require.Equal(t, "3", b.text(t, "#bulk-count"))
		b.screenshot(t, t.TempDir(), "runs-bulk-confirm.png")
		require.Empty(t, byStatus("cancelled"), "the count cancels nothing")
		require.Len(t, byStatus("sleeping"), 7)

		b.click(t, "#bulk-confirm")
		b.waitText(t, "#bulk-result", "Cancelled 3 of the 3 matching run(s).")
		require.Equal(t, runs["a1"], byStatus("cancelled"), "exactly the counted runs were cancelled")
		rest := slices.Concat(runs["a2"], runs["invoice"])
		slices.Sort(rest)
		require.Equal(t, rest, byStatus("sleeping"), "the others still sleep")

		b.click(t, "#bulk-back")
		b.waitText(t, "#found caption", "3 matching run(s)")
		require.Equal(t, "cancelled", b.text(t, "#found td.state"))
	})

	// The refused search's 400 is logged by the browser as a failed resource: expected.
	b.noErrors(t, "the server responded with a status of 400")
}

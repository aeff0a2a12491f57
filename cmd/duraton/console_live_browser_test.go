package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

// TestConsoleBrowserLive: a workflow's page sends a test event from its form; the run
// page it lands on follows the run's live stream (the steps appear as the endpoint is
// released, without a reload, and the page does not poll), draws its waterfall with one
// bar per delivery attempt, and the workflow's page charts its last hour. Takes the
// screenshots docs/operations.md shows.
func TestConsoleBrowserLive(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: starts the duraton binary and chromium")
	}
	b := newBrowser(t)
	p := startDuraton(t, t.TempDir())
	shots := screenshotDir(t)
	console := p.URL + "/console"

	gates := map[string]chan struct{}{"fetch order": make(chan struct{}), "charge card": make(chan struct{})}
	var once sync.Map
	open := func(name string) {
		if _, done := once.LoadOrStore(name, true); !done {
			close(gates[name])
		}
	}
	route := func(c *sdk.Context) (any, error) {
		for _, name := range []string{"fetch order", "charge card"} {
			if _, err := sdk.Run(c, name, func() (string, error) { <-gates[name]; return name + " done", nil }); err != nil {
				return nil, err
			}
		}
		if err := c.Sleep("cool down", 1500*time.Millisecond); err != nil {
			return nil, err
		}
		return sdk.Run(c, "send receipt", func() (string, error) { return "sent", nil })
	}
	mux := http.NewServeMux()
	mux.Handle("/pipeline", sdk.Serve(route, sdk.WithServeCredentials(p.URL, p.Token),
		sdk.WithReceiver(&sdk.Receiver{CurrentSigningKey: p.CurrentSigningKey, NextSigningKey: p.NextSigningKey})))
	ep := httptest.NewServer(mux)
	t.Cleanup(ep.Close)
	// Before ep closes (cleanups run last first): a failed check must not leave the
	// endpoint blocked in a step.
	t.Cleanup(func() { open("fetch order"); open("charge card") })

	req, err := http.NewRequest(http.MethodPut, p.URL+"/apps/shop", strings.NewReader(
		`{"workflows":[{"name":"pipeline","url":"`+ep.URL+`/pipeline","triggers":[{"event":"order.placed"}]}]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+p.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := newAPIClient(t, 10*time.Second).Do(req)
	require.NoError(t, err)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", out)

	// The send-event form starts a run and lands on its page.
	b.navigate(t, console+"/workflows/pipeline")
	require.Equal(t, "order.placed", eval[string](t, b, `document.getElementById("event-name").value`))
	b.do(t, chromedp.SetValue(chromedp.CSS("#event-data"), `{"orderId": "o-17"}`))
	b.click(t, "#send-event-button")
	b.waitText(t, "#run-state", "RUN_STARTED")
	require.Contains(t, eval[string](t, b, `location.pathname`), "/console/runs/wfr_")
	require.NotEmpty(t, eval[string](t, b, `document.getElementById("live").getAttribute("data-stream")`))
	require.NotContains(t, eval[string](t, b, `document.getElementById("live").getAttribute("hx-trigger")`), "every 3",
		"a streamed page does not poll every few seconds")

	// The stream brings each step without a reload.
	eval[int](t, b, `window.__stayed = 42`)
	require.NotContains(t, b.text(t, "#waterfall"), "fetch order")
	open("fetch order")
	b.waitText(t, "#waterfall", "fetch order")
	require.NotContains(t, b.text(t, "#waterfall"), "charge card")
	open("charge card")
	b.waitText(t, "#waterfall", "charge card")
	b.waitText(t, "#run-state", "RUN_SUCCESS")
	b.waitText(t, "#waterfall", "send receipt")
	require.Equal(t, 42, eval[int](t, b, `window.__stayed`), "the page was updated in place, never reloaded")

	// One bar per attempt: as many as the timeline lists answered attempts.
	answered := eval[int](t, b, `Array.from(document.querySelectorAll(".attempts tbody tr td.state")).filter(td => ["DELIVERED","ERROR","FAILED"].includes(td.textContent)).length`)
	require.Positive(t, answered)
	require.Equal(t, answered, eval[int](t, b, `document.querySelectorAll("#waterfall rect.attempt").length`))
	require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll("#waterfall g[data-kind=sleep]").length`), "the sleep is drawn as a gap")
	b.screenshot(t, shots, "console-waterfall.png")

	// The workflow's last hour.
	b.navigate(t, console+"/workflows/pipeline")
	b.waitText(t, "#chart-totals", "1 runs")
	require.Equal(t, 60, eval[int](t, b, `document.querySelectorAll("#workflow-chart rect.runs").length`))
	require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll("#workflow-chart polyline.p50").length`), "the ended run has a duration")
	b.screenshot(t, shots, "console-workflow-chart.png")

	// A bad event is refused with the reason, and sends nothing.
	b.do(t, chromedp.SetValue(chromedp.CSS("#event-data"), `{not json`))
	b.click(t, "#send-event-button")
	b.waitText(t, "main", "data: not valid JSON")
	b.noErrors(t, "the server responded with a status of 400")

}

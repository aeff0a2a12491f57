package main

// The console in a real headless Chromium (Debian's chromium, driven with chromedp)
// against real duraton processes with real runs. Skips when no chromium is installed,
// except under CI=true, where .ci/run installs it and a missing browser is a failure.

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/sdk"
)

// browserWait bounds every wait for the page in these tests.
const browserWait = 20 * time.Second

// chromiumPath finds the browser, or skips (fails under CI=true) with the reason.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium binary on PATH: .ci/run installs Debian's chromium (apt-get install -y chromium)")
	}
	t.Skip("no chromium binary on PATH (apt-get install -y chromium): console browser tests skipped")
	return ""
}

// browser is one headless Chromium with the page errors it logged.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.Flag("lang", "en-US"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	// The first Run starts the browser; it must not carry a timeout.
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, fmt.Sprintf("%s %s (%s)", m.Source, m, m.URL))
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		<-done
	})
	return b
}

// noErrors fails the test on any console error the pages logged so far, except those
// whose text contains one of allowed.
func (b *browser) noErrors(t *testing.T, allowed ...string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var rest []string
	for _, e := range b.errors {
		if !slices.ContainsFunc(allowed, func(a string) bool { return strings.Contains(e, a) }) {
			rest = append(rest, e)
		}
	}
	require.Empty(t, rest, "the console logged errors in the browser")
}

func (b *browser) timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, browserWait)
}

func (b *browser) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := b.timeout()
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, actions...))
}

func (b *browser) navigate(t *testing.T, url string) { t.Helper(); b.do(t, chromedp.Navigate(url)) }

func (b *browser) click(t *testing.T, sel string) {
	t.Helper()
	b.do(t, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// text is the text of the first element matching sel, waiting for one to exist. It is
// read in one evaluation in the page: a page that refreshes itself swaps its elements,
// and chromedp's TextContent (find the node, then read it) then fails with "No node
// with given id found" when the swap falls between the two.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e === null ? null : e.textContent; })()`, sel)
	deadline := time.Now().Add(browserWait)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[*string](expr))
		cancel()
		if err == nil && s != nil {
			return *s
		}
		if time.Now().After(deadline) {
			t.Fatalf("text of %s: no such element (last error %v)", sel, err)
		}
		time.Sleep(50 * time.Millisecond) // the element is awaited, as chromedp's query would
	}
}

func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := b.timeout()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, "evaluate %s", expr)
	return v
}

// waitText waits until the element sel shows want. It does not reload the page: a
// page that is already open must bring the change by its own polling. It tolerates
// the page navigating meanwhile (after a form post).
func (b *browser) waitText(t *testing.T, sel, want string) {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e !== null && e.textContent.includes(%q); })()`, sel, want)
	deadline := time.Now().Add(browserWait)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
			t.Fatalf("%s never showed %q (last error %v); page text:\n%s", sel, want, err, body)
		}
		time.Sleep(100 * time.Millisecond) // the page's own refresh is what is awaited
	}
}

// screenshot takes a full-page PNG, checks it is not blank (many distinct colours, and
// a fair share of non-background pixels), and writes it to dir/name.
func (b *browser) screenshot(t *testing.T, dir, name string) {
	t.Helper()
	ctx, cancel := b.timeout()
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(buf))
	require.NoError(t, err)
	colours, inked, total := map[uint32]bool{}, 0, 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
			if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				inked++
			}
			total++
		}
	}
	require.Greater(t, len(colours), 8, "%s: screenshot has almost one colour (blank page?)", name)
	require.Greater(t, inked*1000/total, 5, "%s: under 0.5%% of the screenshot is not background (blank page?)", name)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), buf, 0o644))
}

// screenshotDir is where screenshots go: DURATON_CONSOLE_SCREENSHOTS (the README's are
// made with DURATON_CONSOLE_SCREENSHOTS=$PWD/docs), else a temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("DURATON_CONSOLE_SCREENSHOTS"); d != "" {
		return d
	}
	return t.TempDir()
}

// consoleEndpoint serves a two-step Go SDK workflow on /wf and a failing route on /fail.
func consoleEndpoint(t *testing.T, base, token string, receiver *sdk.Receiver) *httptest.Server {
	t.Helper()
	route := func(c *sdk.Context) (any, error) {
		var in struct {
			Name string `json:"name"`
		}
		if err := c.DecodePayload(&in); err != nil {
			return nil, sdk.NonRetryable(err)
		}
		n, err := sdk.Run(c, "count letters", func() (int, error) { return len(in.Name), nil })
		if err != nil {
			return nil, err
		}
		return sdk.Run(c, "greet", func() (string, error) { return fmt.Sprintf("hello %s (%d letters)", in.Name, n), nil })
	}
	mux := http.NewServeMux()
	mux.Handle("/wf", sdk.Serve(route, sdk.WithServeCredentials(base, token), sdk.WithReceiver(receiver)))
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":"inventory service down"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func waitRunState(t *testing.T, client *sdk.Client, runID, state string) {
	t.Helper()
	eventually(t, "run "+runID+" reaches "+state, func() bool {
		page, err := client.RunLogs(context.Background(), sdk.RunLogsRequest{RunID: runID})
		return err == nil && len(page.Runs) == 1 && page.Runs[0].State == state
	})
}

// TestConsoleBrowserDev drives every page of `duraton dev`'s console with real runs.
func TestConsoleBrowserDev(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: starts the duraton binary and chromium")
	}
	b := newBrowser(t)
	p := startDuraton(t, t.TempDir())
	ctx := context.Background()
	client, err := sdk.NewClient(sdk.WithBaseURL(p.URL), sdk.WithToken(p.Token),
		sdk.WithHTTPClient(newAPIClient(t, 30*time.Second)), sdk.WithEnv(func(string) string { return "" }))
	require.NoError(t, err)
	ep := consoleEndpoint(t, p.URL, p.Token, &sdk.Receiver{CurrentSigningKey: p.CurrentSigningKey, NextSigningKey: p.NextSigningKey})
	shots := screenshotDir(t)
	console := p.URL + "/console"

	// A run that completes, one failed message in the DLQ, and two runs held by a paused key.
	done, err := client.Trigger(ctx, sdk.TriggerRequest{URL: ep.URL + "/wf", BodyJSON: map[string]string{"name": "Ada"}, Labels: []string{"welcome"}})
	require.NoError(t, err)
	waitRunState(t, client, done.RunID, "RUN_SUCCESS")
	zero := 0
	failed, err := client.Publish(ctx, sdk.PublishRequest{URL: ep.URL + "/fail", Body: []byte(`{"order":42}`), Retries: &zero})
	require.NoError(t, err)
	eventually(t, "the failed message reaches the DLQ", func() bool {
		page, err := client.DLQ(ctx, sdk.DLQRequest{})
		return err == nil && len(page.Messages) == 1
	})
	require.NoError(t, client.PauseFlowControl(ctx, "held"))
	// Pinned, the key stays listed once its runs are done (an idle key without settings
	// is dropped): the keys page can show it resumed, pause it and post its form.
	require.NoError(t, client.PinFlowControl(ctx, "held", 1, 0, 0))
	held := sdk.FlowControl{Key: "held", Parallelism: 1}
	stuck, err := client.Trigger(ctx, sdk.TriggerRequest{URL: ep.URL + "/wf", BodyJSON: map[string]string{"name": "Bo"}, FlowControl: &held})
	require.NoError(t, err)
	later, err := client.Trigger(ctx, sdk.TriggerRequest{URL: ep.URL + "/wf", BodyJSON: map[string]string{"name": "Cy"}, FlowControl: &held, Labels: []string{"later"}})
	require.NoError(t, err)

	t.Run("Overview", func(t *testing.T) {
		b.navigate(t, console+"/")
		b.waitText(t, "#total-runs", "3")
		require.Equal(t, "1", b.text(t, `td[data-state="RUN_SUCCESS"]`))
		require.Equal(t, "2", b.text(t, `td[data-state="RUN_STARTED"]`))
		require.Contains(t, b.text(t, "#hour-totals"), "1 failed attempts")
		b.screenshot(t, shots, "console-overview.png")
	})

	t.Run("RunsFilterAndTimeline", func(t *testing.T) {
		b.navigate(t, console+"/runs?label=welcome")
		b.waitText(t, "tr[data-run="+done.RunID+"] .state", "RUN_SUCCESS")
		require.Equal(t, 1, eval[int](t, b, `document.querySelectorAll("tr[data-run]").length`), "the label filter keeps one run")
		b.screenshot(t, t.TempDir(), "runs.png")

		b.navigate(t, console+"/runs/"+done.RunID)
		b.waitText(t, "#run-state", "RUN_SUCCESS")
		timeline := b.text(t, ".timeline")
		for _, want := range []string{"init", "count letters", "greet", "hello Ada (3 letters)", "DELIVERED"} {
			require.Contains(t, timeline, want)
		}
		b.screenshot(t, shots, "console-run.png")
	})

	t.Run("WaitingRunShowsWhyAndCancel", func(t *testing.T) {
		b.navigate(t, console+"/runs/"+stuck.RunID)
		b.waitText(t, "#wait-reason", "paused(key=held)")
		b.click(t, "#cancel-run")
		b.waitText(t, "#run-state", "RUN_CANCELED")
		waitRunState(t, client, stuck.RunID, "RUN_CANCELED")
		b.screenshot(t, t.TempDir(), "run-canceled.png")
	})

	t.Run("KeysResumeAndPause", func(t *testing.T) {
		b.navigate(t, console+"/keys")
		b.waitText(t, `tr[data-key="held"] .keystate`, "paused")
		b.screenshot(t, t.TempDir(), "keys.png")
		b.click(t, `tr[data-key="held"] button[value="resume"]`)
		waitRunState(t, client, later.RunID, "RUN_SUCCESS")
		b.waitText(t, `tr[data-key="held"] .keystate`, "active")
		b.click(t, `tr[data-key="held"] button[value="pause"]`)
		b.waitText(t, `tr[data-key="held"] .keystate`, "paused")
		info, err := client.FlowControlInfo(ctx, "held")
		require.NoError(t, err)
		require.True(t, info.IsPaused, "the console's pause reached the engine")
	})

	t.Run("LiveRefreshKeepsFilter", func(t *testing.T) {
		b.navigate(t, console+"/runs?label=later")
		b.waitText(t, "tr[data-run="+later.RunID+"] .state", "RUN_SUCCESS")
		fresh, err := client.Trigger(ctx, sdk.TriggerRequest{URL: ep.URL + "/wf", BodyJSON: map[string]string{"name": "Di"}, Labels: []string{"later"}})
		require.NoError(t, err)
		// No navigation: the page's polling brings the new run, and the filter stays.
		b.waitText(t, "tr[data-run="+fresh.RunID+"] .state", "RUN_")
		require.Equal(t, "later", eval[string](t, b, `document.getElementById("label").value`))
		require.NotContains(t, b.text(t, "#live"), done.RunID, "the filter still applies")
	})

	t.Run("MessagesAndLogs", func(t *testing.T) {
		b.navigate(t, console+"/messages?url="+url.QueryEscape("/fail"))
		b.waitText(t, "#live", failed.MessageID)
		require.Contains(t, b.text(t, "#live"), "FAILED")
		b.navigate(t, console+"/messages?id="+failed.MessageID+"&state=FAILED")
		b.waitText(t, "#live", "FAILED")
		b.screenshot(t, t.TempDir(), "messages.png")
	})

	t.Run("DLQInspectRetryDelete", func(t *testing.T) {
		page, err := client.DLQ(ctx, sdk.DLQRequest{})
		require.NoError(t, err)
		require.Len(t, page.Messages, 1)
		first := page.Messages[0].DLQID
		b.navigate(t, console+"/dlq/"+first)
		require.Equal(t, "500", b.text(t, "#dlq-status"))
		require.Contains(t, b.text(t, "#dlq-body"), "inventory service down")
		b.screenshot(t, t.TempDir(), "dlq-entry.png")
		b.click(t, `button[value="retry"]`)
		// The retried message fails again (no retries): a new dead letter replaces the first.
		var second string
		eventually(t, "the retry made a new dead letter", func() bool {
			page, err := client.DLQ(ctx, sdk.DLQRequest{})
			if err != nil || len(page.Messages) != 1 || page.Messages[0].DLQID == first {
				return false
			}
			second = page.Messages[0].DLQID
			return true
		})
		b.waitText(t, "#live", second) // the DLQ page the retry landed on refreshes itself
		require.NotContains(t, b.text(t, "#live"), first)
		require.Contains(t, b.text(t, "#live"), "500 endpoint answered 500")
		b.screenshot(t, t.TempDir(), "dlq.png")
		b.click(t, `button[value="delete"]`)
		b.waitText(t, "#live", "The DLQ is empty.")
	})

	t.Run("WorkflowsAndEvents", func(t *testing.T) {
		native := func(method, path, body string) string {
			req, err := http.NewRequest(method, p.URL+path, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+p.Token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := newAPIClient(t, 10*time.Second).Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			out, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Less(t, resp.StatusCode, 300, "%s %s: %s", method, path, out)
			return string(out)
		}
		native(http.MethodPut, "/apps/shop", `{"workflows":[{"name":"greet","url":"`+ep.URL+`/wf",`+
			`"triggers":[{"event":"user.signed_up"}],"rateLimit":{"limit":1,"perMs":60000}}]}`)
		native(http.MethodPost, "/events", `[{"name":"user.signed_up","data":{"name":"Di"}},{"name":"user.signed_up","data":{"name":"Ed"}}]`)
		b.navigate(t, console+"/workflows")
		b.waitText(t, `tr[data-workflow="greet"]`, "rate limit: 1 events per 1m")
		b.screenshot(t, t.TempDir(), "workflows.png")
		b.navigate(t, console+"/events")
		b.waitText(t, "#live", "greet: dropped (rate limit)")
		require.Contains(t, b.text(t, "#live"), "greet: run ")
		b.screenshot(t, t.TempDir(), "events.png")
	})

	t.Run("PhoneWidth", func(t *testing.T) {
		b.do(t, chromedp.EmulateViewport(390, 844))
		defer b.do(t, chromedp.EmulateViewport(1280, 900))
		for _, page := range []string{"/", "/workflows", "/runs", "/keys", "/messages", "/dlq", "/events"} {
			b.navigate(t, console+page)
			b.waitText(t, "nav", "Overview")
			// The page itself never scrolls sideways; wide tables scroll inside their box.
			overflow := eval[int](t, b, `document.documentElement.scrollWidth - window.innerWidth`)
			require.LessOrEqual(t, overflow, 0, "%s scrolls sideways at phone width", page)
		}
		b.screenshot(t, t.TempDir(), "phone-dlq.png")
	})

	t.Run("PostWithoutCSRFRefused", func(t *testing.T) {
		b.navigate(t, console+"/keys")
		cctx, cancel := b.timeout()
		res, err := chromedp.Call(cctx, network.GetCookies, network.GetCookiesParams{URLs: []string{console + "/"}})
		cancel()
		require.NoError(t, err)
		cookies := res.Cookies
		require.Len(t, cookies, 1)
		require.True(t, cookies[0].HTTPOnly)
		require.Equal(t, network.CookieSameSiteStrict, cookies[0].SameSite)
		csrf := eval[string](t, b, `document.querySelector("input[name=csrf]").value`)
		post := func(form url.Values) int {
			req, err := http.NewRequest(http.MethodPost, console+"/keys/action", strings.NewReader(form.Encode()))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(&http.Cookie{Name: cookies[0].Name, Value: cookies[0].Value})
			resp, err := noRedirect.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		require.Equal(t, http.StatusForbidden, post(url.Values{"key": {"held"}, "op": {"resume"}}))
		require.Equal(t, http.StatusForbidden, post(url.Values{"key": {"held"}, "op": {"resume"}, "csrf": {"wrong"}}))
		info, err := client.FlowControlInfo(ctx, "held")
		require.NoError(t, err)
		require.True(t, info.IsPaused, "a refused post changed nothing")
		require.Equal(t, http.StatusSeeOther, post(url.Values{"key": {"held"}, "op": {"resume"}, "csrf": {csrf}}))
		info, err = client.FlowControlInfo(ctx, "held")
		require.NoError(t, err)
		require.False(t, info.IsPaused, "the same post with the token acts")
	})

	b.noErrors(t)
}

var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// TestConsoleBrowserServeLogin: `duraton serve`'s console asks for the project token and
// keeps a session after it.
func TestConsoleBrowserServeLogin(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: starts the duraton binary and chromium")
	}
	b := newBrowser(t)
	const token = "console-token-0123456789abcdefghijklmnop"
	p := startServe(t, t.TempDir(), "--token", token)
	console := p.URL + "/console"

	b.navigate(t, console+"/runs")
	loc := eval[string](t, b, `location.href`)
	require.Equal(t, console+"/login", loc, "serve mode sends a visitor without a session to the login")
	b.screenshot(t, t.TempDir(), "login.png")
	resp, err := noRedirect.Get(console + "/runs")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	b.do(t, chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"), chromedp.Submit(chromedp.CSS("#token")))
	b.waitText(t, ".error", "invalid token")
	b.do(t, chromedp.Navigate(console+"/login"), chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Submit(chromedp.CSS("#token")))
	b.waitText(t, "h1", "Overview")
	b.screenshot(t, t.TempDir(), "serve-overview.png")
	b.navigate(t, console+"/runs")
	b.waitText(t, "h1", "Runs")

	// The failed login's 401 answer is logged by the browser as a failed resource: expected.
	b.noErrors(t, "401")
}

package console

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/deliverytest"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/storage"
)

const (
	tokenA = "token-a-0123456789abcdefghijklmnopqrstuv"
	tokenB = "token-b-0123456789abcdefghijklmnopqrstuv"
)

// env is a real engine on a real bbolt file with two projects, and the console over it
// on a loopback HTTP server.
type env struct {
	engine  *delivery.Engine
	native  *native.Service
	console *Console
	url     string
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	store, err := storage.Open(filepath.Join(t.TempDir(), "duraton.db"), storage.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	for id, token := range map[string]string{"a": tokenA, "b": tokenB} {
		_, err := delivery.EnsureProject(t.Context(), store, delivery.Project{ID: id, Name: id,
			CurrentSigningKey: delivery.NewSigningKey(), NextSigningKey: delivery.NewSigningKey()}, server.TokenHash(token))
		require.NoError(t, err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	engine, err := delivery.New(delivery.Config{Destinations: netguard.Policy{Allow: netguard.LoopbackPrefixes()}, Logger: log}, store)
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	t.Cleanup(engine.Stop)
	if cfg.ProjectForToken == nil {
		cfg.ProjectForToken = func(ctx context.Context, token string) (string, error) {
			return engine.ProjectForToken(ctx, server.TokenHash(token))
		}
	}
	policy := netguard.Policy{Allow: netguard.LoopbackPrefixes()}
	nat, err := native.New(native.Config{CheckURL: policy.CheckURL}, store, engine)
	require.NoError(t, err)
	if cfg.Native == nil {
		cfg.Native = nat
	}
	cfg.Logger = log
	c, err := New(cfg, engine)
	require.NoError(t, err)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return &env{engine: engine, native: nat, console: c, url: srv.URL}
}

// visitor is a browser-like client: a cookie jar, no redirects followed.
type visitor struct {
	t      *testing.T
	e      *env
	client *http.Client
}

func (e *env) visitor(t *testing.T) *visitor {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &visitor{t: t, e: e, client: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (v *visitor) do(req *http.Request) (int, http.Header, string) {
	v.t.Helper()
	resp, err := v.client.Do(req)
	require.NoError(v.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(v.t, err)
	return resp.StatusCode, resp.Header, string(body)
}

func (v *visitor) get(path string) (int, http.Header, string) {
	v.t.Helper()
	req, err := http.NewRequest(http.MethodGet, v.e.url+path, nil)
	require.NoError(v.t, err)
	return v.do(req)
}

func (v *visitor) post(path string, form url.Values, header ...string) (int, http.Header, string) {
	v.t.Helper()
	req, err := http.NewRequest(http.MethodPost, v.e.url+path, strings.NewReader(form.Encode()))
	require.NoError(v.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return v.do(req)
}

func (v *visitor) login(token string) {
	v.t.Helper()
	status, h, body := v.post("/console/login", url.Values{"token": {token}})
	require.Equal(v.t, http.StatusSeeOther, status, body)
	require.Equal(v.t, "/console/", h.Get("Location"))
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf reads the CSRF token from a page.
func (v *visitor) csrf(path string) string {
	v.t.Helper()
	status, _, body := v.get(path)
	require.Equal(v.t, http.StatusOK, status, body)
	m := csrfField.FindStringSubmatch(body)
	require.NotNil(v.t, m, "no CSRF field on %s", path)
	return m[1]
}

// failingEndpoint answers 500 to everything.
func failingEndpoint(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "project b's secret answer")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// deadLetter publishes a message of project that fails at once and returns its DLQ id.
func deadLetter(t *testing.T, e *env, project, dest string) string {
	t.Helper()
	res, err := e.engine.Publish(t.Context(), []*delivery.Message{{Project: project, URL: dest, Method: "POST", Body: []byte("b-body")}})
	require.NoError(t, err)
	var id string
	deliverytest.Eventually(t, 10*time.Second, "a dead letter for "+res[0].MessageID, func() bool {
		entries, _, err := e.engine.DLQ(t.Context(), project, "", 10, func(d *delivery.DLQEntry) bool { return d.Message.ID == res[0].MessageID })
		require.NoError(t, err)
		if len(entries) == 1 {
			id = entries[0].DLQID
		}
		return id != ""
	})
	return id
}

func TestServeLoginRequired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	v := e.visitor(t)
	for _, path := range []string{"/console/", "/console/runs", "/console/keys", "/console/messages", "/console/dlq", "/console/runs/x"} {
		status, h, _ := v.get(path)
		require.Equal(t, http.StatusSeeOther, status, path)
		require.Equal(t, "/console/login", h.Get("Location"), path)
	}
	status, _, body := v.post("/console/keys/action", url.Values{"key": {"k"}, "op": {"pause"}})
	require.Equal(t, http.StatusForbidden, status, "a post without a session is refused")
	require.Contains(t, body, "no console session")

	status, _, body = v.post("/console/login", url.Values{"token": {"wrong-token"}})
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, "invalid token")
	status, _, _ = v.get("/console/")
	require.Equal(t, http.StatusSeeOther, status, "a failed login opens nothing")

	v.login(tokenA)
	status, _, body = v.get("/console/")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "Runs by state")
	require.Contains(t, body, "Log out")

	csrf := v.csrf("/console/")
	status, h, _ := v.post("/console/logout", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/console/login", h.Get("Location"))
	status, _, _ = v.get("/console/")
	require.Equal(t, http.StatusSeeOther, status, "logged out")
}

func TestSessionCookieAttributes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	v := e.visitor(t)
	_, h, _ := v.post("/console/login", url.Values{"token": {tokenA}})
	cookie := h.Get("Set-Cookie")
	for _, want := range []string{"duraton_console=", "Path=/console", "HttpOnly", "SameSite=Strict", "Max-Age=43200"} {
		require.Contains(t, cookie, want)
	}
	require.NotContains(t, cookie, "Secure", "plain HTTP and no public https URL: a browser would drop a Secure cookie")
}

// TestSessionCookieSecure: behind a proxy that terminates TLS (SecureCookie, set by
// `serve --public-url https://...`) the cookie is Secure, at login and at logout.
func TestSessionCookieSecure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{SecureCookie: true})
	v := e.visitor(t)
	_, h, _ := v.post("/console/login", url.Values{"token": {tokenA}})
	require.Contains(t, h.Get("Set-Cookie"), "; Secure")
	v.login(tokenA)
	_, h, _ = v.post("/console/logout", url.Values{"csrf": {v.csrf("/console/")}})
	require.Contains(t, h.Get("Set-Cookie"), "; Secure")
	require.Contains(t, h.Get("Set-Cookie"), "Max-Age=0")
}

func TestPostNeedsCSRFToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	v := e.visitor(t)
	v.login(tokenA)
	require.NoError(t, e.engine.SetFlowKeyPaused(t.Context(), "a", "k", true))
	for _, form := range []url.Values{
		{"key": {"k"}, "op": {"resume"}},
		{"key": {"k"}, "op": {"resume"}, "csrf": {"0000"}},
	} {
		status, _, body := v.post("/console/keys/action", form)
		require.Equal(t, http.StatusForbidden, status, body)
		require.True(t, e.engine.FlowKey("a", "k").Paused, "a refused post changes nothing")
	}
	// Another visitor's token does not do either.
	other := e.visitor(t)
	other.login(tokenA)
	status, _, _ := v.post("/console/keys/action", url.Values{"key": {"k"}, "op": {"resume"}, "csrf": {other.csrf("/console/keys")}})
	require.Equal(t, http.StatusForbidden, status)

	status, _, body := v.post("/console/keys/action", url.Values{"key": {"k"}, "op": {"resume"}, "csrf": {v.csrf("/console/keys")}})
	require.Equal(t, http.StatusSeeOther, status, body)
	require.False(t, e.engine.FlowKey("a", "k").Paused)
}

func TestCrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	v := e.visitor(t)
	status, _, _ := v.post("/console/login", url.Values{"token": {tokenA}}, "Origin", "http://evil.example")
	require.Equal(t, http.StatusForbidden, status, "a login posted from another site is refused")
	v.login(tokenA)
	csrf := v.csrf("/console/keys")
	status, _, _ = v.post("/console/keys/action", url.Values{"key": {"k"}, "op": {"pause"}, "csrf": {csrf}}, "Origin", "null")
	require.Equal(t, http.StatusForbidden, status)
	require.False(t, e.engine.FlowKey("a", "k").Paused)
}

// TestProjectIsolation: a session of project a sees nothing of project b, by list or id,
// and cannot act on b's records.
func TestProjectIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	dlqB := deadLetter(t, e, "b", failingEndpoint(t))
	require.NoError(t, e.engine.SetFlowKeyPaused(t.Context(), "b", "b-key", true))

	a := e.visitor(t)
	a.login(tokenA)
	for _, path := range []string{"/console/dlq", "/console/keys", "/console/messages", "/console/runs"} {
		status, _, body := a.get(path)
		require.Equal(t, http.StatusOK, status, path)
		require.NotContains(t, body, dlqB, path)
		require.NotContains(t, body, "b-key", path)
		require.NotContains(t, body, "secret answer", path)
	}
	status, _, _ := a.get("/console/dlq/" + dlqB)
	require.Equal(t, http.StatusNotFound, status)
	csrf := a.csrf("/console/dlq")
	for _, op := range []string{"delete", "retry"} {
		status, _, _ = a.post("/console/dlq/action", url.Values{"id": {dlqB}, "op": {op}, "csrf": {csrf}})
		require.Equal(t, http.StatusNotFound, status, op)
	}
	entries, _, err := e.engine.DLQ(t.Context(), "b", "", 10, func(*delivery.DLQEntry) bool { return true })
	require.NoError(t, err)
	require.Len(t, entries, 1, "b's dead letter is untouched")
	require.NoError(t, a.postOK("/console/keys/action", url.Values{"key": {"b-key"}, "op": {"resume"}, "csrf": {csrf}}))
	require.True(t, e.engine.FlowKey("b", "b-key").Paused, "a's resume of a key of the same name is a's own key")

	b := e.visitor(t)
	b.login(tokenB)
	status, _, body := b.get("/console/dlq/" + dlqB)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "secret answer")
}

func (v *visitor) postOK(path string, form url.Values) error {
	status, _, body := v.post(path, form)
	if status != http.StatusSeeOther {
		return &url.Error{Op: "POST", URL: path, Err: io.ErrUnexpectedEOF}
	}
	_ = body
	return nil
}

func TestDevOpenOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{Dev: true, DevProject: "a"})
	v := e.visitor(t)
	status, _, body := v.get("/console/")
	require.Equal(t, http.StatusOK, status, "dev mode opens without login")
	require.NotContains(t, body, "Log out")
	require.NoError(t, e.engine.SetFlowKeyPaused(t.Context(), "a", "k", true)) // listed, with its buttons
	csrf := v.csrf("/console/keys")
	status, _, _ = v.post("/console/keys/action", url.Values{"key": {"k"}, "op": {"resume"}})
	require.Equal(t, http.StatusForbidden, status, "dev mode still needs the CSRF token")
	require.True(t, e.engine.FlowKey("a", "k").Paused)
	status, _, _ = v.post("/console/keys/action", url.Values{"key": {"k"}, "op": {"resume"}, "csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, status)
	require.False(t, e.engine.FlowKey("a", "k").Paused)

	for addr, want := range map[string]int{"10.1.2.3:5555": http.StatusForbidden, "[2001:db8::1]:80": http.StatusForbidden, "[::1]:80": http.StatusOK} {
		req := httptest.NewRequest(http.MethodGet, "/console/", nil)
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		e.console.ServeHTTP(rec, req)
		require.Equal(t, want, rec.Code, addr)
	}
}

// TestStrictCSP: every page carries the policy, and no page has inline script, inline
// style or event-handler attributes the policy would block.
func TestStrictCSP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	deadLetter(t, e, "a", failingEndpoint(t))
	v := e.visitor(t)
	status, h, body := v.get("/console/login")
	require.Equal(t, http.StatusOK, status)
	pages := map[string]string{"/console/login": body}
	require.Equal(t, csp, h.Get("Content-Security-Policy"))
	v.login(tokenA)
	for _, path := range []string{"/console/", "/console/workflows", "/console/runs", "/console/keys", "/console/messages", "/console/dlq", "/console/events", "/console/nope"} {
		_, h, body := v.get(path)
		require.Equal(t, csp, h.Get("Content-Security-Policy"), path)
		require.Equal(t, "DENY", h.Get("X-Frame-Options"))
		pages[path] = body
	}
	require.NotContains(t, csp, "unsafe")
	scriptTag := regexp.MustCompile(`(?i)<script[^>]*>`)
	blocked := regexp.MustCompile(`(?i)<style|\sstyle=|\son[a-z]+=|javascript:`)
	for path, body := range pages {
		for _, tag := range scriptTag.FindAllString(body, -1) {
			require.Contains(t, tag, ` src="/console/static/`, "%s: inline or foreign script %s", path, tag)
		}
		require.False(t, blocked.MatchString(body), "%s has inline style or handler: %s", path, blocked.FindString(body))
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	v := e.visitor(t)
	v.login(tokenA)
	for path, want := range map[string]string{
		"/console/runs?status=BOGUS":                      "status: want one of",
		"/console/messages?state=NOPE":                    "state: want one of",
		"/console/runs?label=" + strings.Repeat("x", 600): "label: longer than 512 bytes",
		"/console/runs/does-not-exist":                    "not found in this project",
	} {
		status, _, body := v.get(path)
		require.GreaterOrEqual(t, status, 400, path)
		require.Less(t, status, 500, path)
		require.Contains(t, body, want, path)
	}
	csrf := v.csrf("/console/keys")
	status, _, body := v.post("/console/keys/action", url.Values{"key": {"k"}, "op": {"explode"}, "csrf": {csrf}})
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "op: want pause, resume or reset")
	status, _, body = v.post("/console/keys/action", url.Values{"key": {strings.Repeat("k", 5000)}, "op": {"pause"}, "csrf": {csrf}})
	require.Equal(t, http.StatusBadRequest, status, body)
	status, _, _ = v.post("/console/keys/action", url.Values{"key": {strings.Repeat("k", 20_000)}, "csrf": {csrf}})
	require.Equal(t, http.StatusBadRequest, status, "a form over 16 KiB is refused")
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestSessionExpiresAndTableIsBounded(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	e := newEnv(t, Config{SessionTTL: time.Hour, MaxSessions: 3, Now: clock.Now})
	v := e.visitor(t)
	v.login(tokenA)
	status, _, _ := v.get("/console/keys")
	require.Equal(t, http.StatusOK, status)
	clock.Add(time.Hour)
	status, h, _ := v.get("/console/keys")
	require.Equal(t, http.StatusSeeOther, status, "an expired session is gone")
	require.Equal(t, "/console/login", h.Get("Location"))

	for range 5 {
		e.visitor(t).login(tokenB)
	}
	require.Equal(t, 3, e.console.sessions.len())
	last := e.visitor(t)
	last.login(tokenB)
	status, _, _ = last.get("/console/")
	require.Equal(t, http.StatusOK, status, "the newest session survives eviction")
}

// TestLoginFailuresLimited: past LoginFailures a minute, an address's logins are refused
// before the token is looked up — a valid token it never logged in with answers like a
// wrong one, so the console is no faster oracle than the API — while a token it logged
// in with before still works.
func TestLoginFailuresLimited(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	e := newEnv(t, Config{LoginFailures: 2, Now: clock.Now})
	v := e.visitor(t)
	v.login(tokenA) // a visitor already working from this address
	for range 2 {
		status, _, _ := v.post("/console/login", url.Values{"token": {"guess"}})
		require.Equal(t, http.StatusUnauthorized, status)
	}
	status, h, _ := v.post("/console/login", url.Values{"token": {"guess"}})
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "60", h.Get("Retry-After"))
	status, _, _ = e.visitor(t).post("/console/login", url.Values{"token": {tokenB}})
	require.Equal(t, http.StatusTooManyRequests, status, "a valid token new to this address waits like a guess")
	v.login(tokenA) // the token this address logged in with is not refused
	clock.Add(time.Minute)
	status, _, _ = e.visitor(t).post("/console/login", url.Values{"token": {"guess"}})
	require.Equal(t, http.StatusUnauthorized, status, "the window passed")
	e.visitor(t).login(tokenB)
}

func TestConfigValidated(t *testing.T) {
	t.Parallel()
	_, err := New(Config{}, nil)
	require.ErrorContains(t, err, "ProjectForToken is required")
	_, err = New(Config{Dev: true}, nil)
	require.ErrorContains(t, err, "DevProject is required")
	_, err = New(Config{Dev: true, DevProject: "p", SessionTTL: -1}, nil)
	require.ErrorContains(t, err, "must not be negative")
	_, err = New(Config{Dev: true, DevProject: "p", BulkLimit: native.MaxBulkLimit + 1}, nil)
	require.ErrorContains(t, err, "BulkLimit must be 1 to 10000")
}

// The Workflows page says each workflow's controls in words; the Events page says what
// each workflow did with an event; another project sees neither.
func TestWorkflowsAndEventsPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	ep := deliverytest.NewEndpoint(t, nil)
	defs, err := e.native.ParseApp("shop", []byte(`{"workflows":[
		{"name":"sync.account","url":"`+ep.URL("/sync")+`","triggers":[{"event":"account.updated"}],
		 "concurrency":{"limit":5,"key":"event.data.accountId"},"rateLimit":{"limit":1,"perMs":60000},
		 "priority":{"run":"event.data.urgent ? 60 : 0"},
		 "cancelOn":[{"event":"account.deleted","match":"data.accountId","timeoutMs":3600000}]}]}`))
	require.NoError(t, err)
	_, err = e.native.PutApp(t.Context(), "a", "shop", defs)
	require.NoError(t, err)
	res, err := e.native.SendEvents(t.Context(), "a", []native.EventIn{
		{Name: "account.updated", Data: []byte(`{"accountId":7}`)},
		{Name: "account.updated", Data: []byte(`{"accountId":7}`)},
	})
	require.NoError(t, err)
	require.Len(t, res, 2)

	a := e.visitor(t)
	a.login(tokenA)
	status, _, body := a.get("/console/workflows")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "sync.account")
	require.Contains(t, body, "at most 5 running per event.data.accountId")
	require.Contains(t, body, "rate limit: 1 events per 1m, the rest dropped")
	require.Contains(t, body, "priority: shifted by event.data.urgent ? 60 : 0 seconds")
	require.Contains(t, body, "cancelled by account.deleted with the same data.accountId within 1h of the run&#39;s start")
	require.Contains(t, body, "account.updated")
	require.Regexp(t, `runs-hour"><a href="/console/runs\?workflow=sync.account">1</a>`, body, "one run in the last hour (the second event was dropped)")

	status, _, body = a.get("/console/events?name=account.updated")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, res[0].ID)
	require.Contains(t, body, "sync.account: run "+res[0].Runs[0].RunID)
	require.Contains(t, body, "sync.account: dropped (rate limit)")

	b := e.visitor(t)
	b.login(tokenB)
	_, _, body = b.get("/console/workflows")
	require.NotContains(t, body, "sync.account", "another project's workflows")
	_, _, body = b.get("/console/events")
	require.NotContains(t, body, res[0].ID, "another project's events")
}

// Bulk DLQ actions take the selected dead letters of the session's project: all of them
// or, when one is not the project's, none.
func TestDLQBulkActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	fail := failingEndpoint(t)
	first, second := deadLetter(t, e, "a", fail), deadLetter(t, e, "a", fail)
	other := deadLetter(t, e, "b", fail)
	v := e.visitor(t)
	v.login(tokenA)
	token := v.csrf("/console/dlq")
	remaining := func(project string) int {
		entries, _, err := e.engine.DLQ(t.Context(), project, "", 10, func(*delivery.DLQEntry) bool { return true })
		require.NoError(t, err)
		return len(entries)
	}

	status, _, _ := v.post("/console/dlq/bulk", url.Values{"csrf": {token}, "op": {"delete-selected"}})
	require.Equal(t, http.StatusBadRequest, status, "nothing selected")
	status, _, _ = v.post("/console/dlq/bulk", url.Values{"csrf": {token}, "op": {"delete-selected"}, "id": {first, other}})
	require.Equal(t, http.StatusNotFound, status, "another project's dead letter")
	require.Equal(t, 2, remaining("a"), "a refused bulk action changes nothing")
	require.Equal(t, 1, remaining("b"))
	status, _, _ = v.post("/console/dlq/bulk", url.Values{"csrf": {token}, "op": {"shred"}, "id": {first}})
	require.Equal(t, http.StatusBadRequest, status)

	require.NoError(t, v.postOK("/console/dlq/bulk", url.Values{"csrf": {token}, "op": {"delete-selected"}, "id": {first, second}}))
	require.Equal(t, 0, remaining("a"))
	require.Equal(t, 1, remaining("b"), "the other project's dead letter stays")
}

// The Overview shows live native runs and the debounce/batch backlogs; the runs list
// filters by workflow; a failed run can be replayed from its failed step.
func TestNativeOverviewFilterAndReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{})
	ok := deliverytest.NewEndpoint(t, func(*http.Request, int) (int, http.Header, string) {
		return http.StatusOK, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, "{}"
	})
	// charge fails its first delivery only: the replayed run cannot fail again before
	// the test reads its state.
	flaky := deliverytest.NewEndpoint(t, func(_ *http.Request, n int) (int, http.Header, string) {
		if n == 0 {
			return http.StatusInternalServerError, nil, "declined"
		}
		return http.StatusOK, http.Header{"Upstash-Workflow-Sdk-Version": {"1"}}, "{}"
	})
	defs, err := e.native.ParseApp("shop", []byte(`{"workflows":[
		{"name":"collect","url":"`+ok.URL("/collect")+`","triggers":[{"event":"item"}],"batch":{"maxSize":10,"timeoutMs":3600000}},
		{"name":"charge","url":"`+flaky.URL("/charge")+`","triggers":[{"event":"pay"}],"retries":0},
		{"name":"greet","url":"`+ok.URL("/greet")+`","triggers":[{"event":"hello"}]}]}`))
	require.NoError(t, err)
	_, err = e.native.PutApp(t.Context(), "a", "shop", defs)
	require.NoError(t, err)
	_, err = e.native.SendEvents(t.Context(), "a", []native.EventIn{{Name: "item", Data: []byte(`{}`)}, {Name: "item", Data: []byte(`{}`)}})
	require.NoError(t, err)
	res, err := e.native.SendEvents(t.Context(), "a", []native.EventIn{{Name: "pay", Data: []byte(`{}`)}})
	require.NoError(t, err)
	runID := res[0].Runs[0].RunID
	deliverytest.Eventually(t, 10*time.Second, "the charge run failed", func() bool {
		run, err := e.engine.Run(t.Context(), "a", runID)
		return err == nil && run.State == delivery.RunFailed
	})

	v := e.visitor(t)
	v.login(tokenA)
	status, _, body := v.get("/console/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `id="runs-active"`)
	require.Contains(t, body, "2 batched event(s)")
	_, _, body = v.get("/console/workflows")
	require.Contains(t, body, "2 batched event(s), oldest", "the workflow's backlog")

	_, _, body = v.get("/console/runs?workflow=charge")
	require.Contains(t, body, runID)
	_, _, body = v.get("/console/runs?workflow=collect")
	require.NotContains(t, body, runID, "filtered by workflow")

	token := v.csrf("/console/runs/" + runID)
	require.NoError(t, v.postOK("/console/runs/"+runID+"/replay", url.Values{"csrf": {token}}))
	run, err := e.engine.Run(t.Context(), "a", runID)
	require.NoError(t, err)
	require.NotEqual(t, delivery.RunFailed, run.State, "replayed: live again")
	hello, err := e.native.SendEvents(t.Context(), "a", []native.EventIn{{Name: "hello", Data: []byte(`{}`)}})
	require.NoError(t, err)
	status, _, _ = v.post("/console/runs/"+hello[0].Runs[0].RunID+"/replay", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusConflict, status, "only a failed run is replayed")
}

// TestSessionsCappedPerProject: logins with project b's token never end project a's
// session: b loses its own oldest sessions at its per-project limit, and a full table
// refuses a project that holds none of its sessions (503) instead of evicting another's.
func TestSessionsCappedPerProject(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Config{MaxSessions: 5, MaxSessionsPerProject: 3})
	a := e.visitor(t)
	a.login(tokenA)
	var bs []*visitor
	for range 20 {
		b := e.visitor(t)
		b.login(tokenB)
		bs = append(bs, b)
	}
	status, _, _ := a.get("/console/keys")
	require.Equal(t, http.StatusOK, status, "a's session survives b's logins")
	require.Equal(t, 4, e.console.sessions.len(), "a's one and b's three")
	status, _, _ = bs[0].get("/console/keys")
	require.Equal(t, http.StatusSeeOther, status, "b's oldest session went")
	status, _, _ = bs[19].get("/console/keys")
	require.Equal(t, http.StatusOK, status, "b's newest session stays")

	// A table full of others' sessions refuses a newcomer rather than evict them.
	full := newSessions(2, 2, time.Hour, time.Now)
	_, _, err := full.create("a")
	require.NoError(t, err)
	_, _, err = full.create("a")
	require.NoError(t, err)
	_, _, err = full.create("b")
	require.ErrorIs(t, err, errSessionsFull)
	require.Equal(t, 2, full.len())
}

// Package console serves Duraton's browser console at /console: server-rendered pages
// (html/template) over the engine's reads, with htmx (vendored, embedded) polling small
// partials so a page refreshes itself without losing its filters or scroll.
//
// Security: in dev mode the console is open, but only to loopback clients; in serve mode
// a visitor logs in with the project's API token and gets a session (HttpOnly,
// SameSite=Strict cookie, server-side table with expiry). Every state change is a POST
// with the session's CSRF token; the Content-Security-Policy allows only the console's own
// script and style files. A session belongs to one project and sees only that project.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/server/internal/authlimit"
	"github.com/duraton/duraton/server/live"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures the console. Zero fields take the documented defaults.
type Config struct {
	// Dev opens the console without login to loopback clients, on project DevProject.
	// Otherwise (serve mode) a visitor logs in with an API token.
	Dev        bool
	DevProject string
	// ProjectForToken resolves a login token to its project (delivery.ErrNotFound: no
	// such token; another error is a failure to look).
	// Required unless Dev.
	ProjectForToken func(ctx context.Context, token string) (string, error)
	// SecureCookie marks the session cookie Secure on every answer: the console is
	// reached over HTTPS, through a proxy that terminates TLS. Default false: Secure only
	// on a request that came over TLS to this server.
	SecureCookie bool
	// SessionTTL is how long a session lasts after login. Default 12h.
	SessionTTL time.Duration
	// MaxSessions bounds the session table. When it is full, expired sessions are
	// dropped, then the logging-in project's oldest; a project with none there is refused
	// (503) rather than ending another project's session. Default 10,000.
	MaxSessions int
	// MaxSessionsPerProject bounds one project's sessions: a login beyond it ends that
	// project's oldest session. Default 100.
	MaxSessionsPerProject int
	// LoginFailures is how many failed logins one client address (IPv6: /64) may make
	// per minute; beyond, its logins are refused (429) until the minute is over, except
	// with a token it logged in with in the last hour. Default 10.
	LoginFailures int
	// Refresh is how often live parts of a page poll. Default 3s.
	Refresh time.Duration
	// BulkLimit bounds the matching runs one step of a bulk cancel or replay (its count,
	// its confirm) handles; the result offers to go on with the next ones. Default
	// native.DefaultBulkLimit (1,000), at most native.MaxBulkLimit.
	BulkLimit int
	// Native feeds the Workflows and Events pages (nil: they say native workflows are
	// not enabled).
	Native NativeReads
	// Live feeds a run page's updates (its stream instead of polling). Default: nil,
	// pages poll.
	Live *live.Hub
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives errors. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.SessionTTL == 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = 10_000
	}
	if c.MaxSessionsPerProject == 0 {
		c.MaxSessionsPerProject = 100
	}
	if c.LoginFailures == 0 {
		c.LoginFailures = 10
	}
	if c.Refresh == 0 {
		c.Refresh = 3 * time.Second
	}
	if c.BulkLimit == 0 {
		c.BulkLimit = native.DefaultBulkLimit
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Dev && c.DevProject == "" {
		errs = append(errs, errors.New("console: Config.DevProject is required in dev mode"))
	}
	if !c.Dev && c.ProjectForToken == nil {
		errs = append(errs, errors.New("console: Config.ProjectForToken is required outside dev mode"))
	}
	if c.SessionTTL < 0 || c.MaxSessions < 0 || c.MaxSessionsPerProject < 0 || c.LoginFailures < 0 || c.Refresh < 0 {
		errs = append(errs, fmt.Errorf("console: Config.SessionTTL, MaxSessions, MaxSessionsPerProject, LoginFailures and Refresh must not be negative"))
	}
	if c.BulkLimit < 0 || c.BulkLimit > native.MaxBulkLimit {
		errs = append(errs, fmt.Errorf("console: Config.BulkLimit must be 1 to %d, got %d", native.MaxBulkLimit, c.BulkLimit))
	}
	return errors.Join(errs...)
}

// Console is the /console handler.
type Console struct {
	cfg      Config
	engine   *delivery.Engine
	sessions *sessions
	logins   *authlimit.Limiter
	pages    map[string]*template.Template
	mux      *http.ServeMux
	log      *slog.Logger
}

// New builds the console over engine.
func New(cfg Config, engine *delivery.Engine) (*Console, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg: cfg, engine: engine, pages: pages, log: cfg.Logger.With("component", "console"),
		sessions: newSessions(cfg.MaxSessions, cfg.MaxSessionsPerProject, cfg.SessionTTL, cfg.Now),
		logins:   authlimit.New(cfg.LoginFailures, time.Minute, cfg.Now),
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", cacheStatic(http.FileServerFS(static))))
	mux.HandleFunc("GET /console/login", c.loginPage)
	mux.HandleFunc("POST /console/login", c.login)
	mux.HandleFunc("POST /console/logout", c.withSession(c.logout))
	mux.HandleFunc("GET /console/{$}", c.withSession(c.overview))
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /console/workflows", c.withSession(c.workflows))
	mux.HandleFunc("GET /console/workflows/{name}", c.withSession(c.workflow))
	mux.HandleFunc("POST /console/events", c.withSession(c.sendEvent))
	mux.HandleFunc("GET /console/events", c.withSession(c.events))
	mux.HandleFunc("GET /console/runs", c.withSession(c.runs))
	mux.HandleFunc("POST /console/runs/bulk", c.withSession(c.bulkRuns))
	mux.HandleFunc("GET /console/runs/{id}", c.withSession(c.run))
	mux.HandleFunc("GET /console/runs/{id}/events", c.withSession(c.runEvents))
	mux.HandleFunc("POST /console/runs/{id}/cancel", c.withSession(c.cancelRun))
	mux.HandleFunc("POST /console/runs/{id}/replay", c.withSession(c.replayRun))
	mux.HandleFunc("GET /console/keys", c.withSession(c.keys))
	mux.HandleFunc("POST /console/keys/action", c.withSession(c.keyAction))
	mux.HandleFunc("GET /console/messages", c.withSession(c.messages))
	mux.HandleFunc("GET /console/dlq", c.withSession(c.dlq))
	mux.HandleFunc("GET /console/dlq/{id}", c.withSession(c.dlqEntry))
	mux.HandleFunc("POST /console/dlq/action", c.withSession(c.dlqAction))
	mux.HandleFunc("POST /console/dlq/bulk", c.withSession(c.dlqBulk))
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "no such console page")
	})
	c.mux = mux
	return c, nil
}

// csp allows the console's own files only: no inline script, no inline style, no
// framing, forms posting only to the console.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	if c.cfg.Dev && !loopbackClient(r) {
		c.fail(w, r, http.StatusForbidden, "the dev console answers only on loopback; use `duraton serve` to reach it from elsewhere")
		return
	}
	if r.Method == http.MethodPost && !sameOrigin(r) {
		c.fail(w, r, http.StatusForbidden, "cross-origin form post refused")
		return
	}
	c.mux.ServeHTTP(w, r)
}

func cacheStatic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

func loopbackClient(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin refuses a POST whose Origin header names another host. Browsers send
// Origin on every form POST; a request without it (curl) is judged by its CSRF token.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if origin == "null" {
		return false
	}
	_, host, ok := cutScheme(origin)
	return ok && host == r.Host
}

func cutScheme(origin string) (scheme, host string, ok bool) {
	for _, s := range []string{"http://", "https://"} {
		if len(origin) > len(s) && origin[:len(s)] == s {
			return s[:len(s)-3], origin[len(s):], true
		}
	}
	return "", "", false
}

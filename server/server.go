package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/server/internal/authlimit"
	"github.com/duraton/duraton/server/live"
)

// Config configures the HTTP server. Zero fields take the documented defaults; negative
// limits and timeouts are refused by New.
type Config struct {
	// MaxBodyBytes caps one message body (publish, enqueue, each batch entry). Default 1 MiB,
	// QStash's Free plan's message size.
	MaxBodyBytes int64
	// MaxWorkflowBodyBytes caps the body of a workflow message instead: a run's trigger
	// (also /v2/trigger) or a step it publishes (Upstash-Workflow-RunId set). Default 10
	// MiB, QStash's Pay-as-you-go message size; a run's whole history has its own limit
	// (delivery.Config.MaxRunHistoryBytes).
	MaxWorkflowBodyBytes int64
	// MaxBatchMessages caps the entries of one /v2/batch. Default 1,000.
	MaxBatchMessages int
	// MaxBatchBytes caps a whole /v2/batch request body. Default 16 MiB.
	MaxBatchBytes int64
	// MaxRetries caps Upstash-Retries. Default 100.
	MaxRetries int
	// MaxTimeout caps Upstash-Timeout. Default 15m.
	MaxTimeout time.Duration
	// MaxDelay caps Upstash-Delay and Upstash-Not-Before. Default 365 days.
	MaxDelay time.Duration
	// FailedAuthBurst is how many failed authentications one client address may make per
	// minute before it gets 429. Default 100.
	FailedAuthBurst int
	// TokenCacheTTL is how long a valid token is trusted without looking it up again, so
	// a token revoked in the store (`duraton tokens revoke`, on PostgreSQL while replicas
	// run) is refused at most this long after. Default 5s.
	TokenCacheTTL time.Duration
	// HookRate and HookBurst rate-limit the public webhook route per client address
	// (IPv6 by /64): HookRate calls per second on average, HookBurst at once. Defaults 20
	// and 100.
	HookRate  float64
	HookBurst int
	// MaxHops refuses (400) a request whose Duraton-Hops header says it descends from that
	// many Duraton deliveries: a message that comes back through Duraton (a destination
	// that leads to its own /v2/publish) stops after MaxHops rounds. Default 8.
	MaxHops int
	// MaxHeaderBytes caps the request header size. Default 64 KiB.
	MaxHeaderBytes int
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound slow clients.
	// Defaults 10s, 60s, 60s, 120s.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// CheckDestination validates a destination URL at publish time (the dial-time check in
	// the engine stays the real boundary). Required.
	CheckDestination func(raw string) (*url.URL, error)
	// Metrics serves GET /metrics (the Prometheus exposition, with its own optional
	// bearer token). Default: /metrics answers 404.
	Metrics http.Handler
	// Schedules serves /v2/schedules. Default: those routes answer 404.
	Schedules Schedules
	// URLGroups serves /v2/topics and the fan-out of a publication to a group name.
	// Default: those routes answer 404 and a destination must be a URL.
	URLGroups URLGroups
	// ForwardSecret, when set, is the secret replicas on one database share: a request
	// that carries it in replica.SecretHeader was forwarded by a follower replica, and
	// its client's address is the last entry of X-Forwarded-For (which the follower
	// appended). Any other request's X-Forwarded-For is ignored. Default "": never.
	ForwardSecret string
	// AdminToken and Backup serve GET /admin/backup (a snapshot of the whole data file)
	// to a caller with "Authorization: Bearer <AdminToken>". Default: that route answers
	// 404.
	AdminToken string
	Backup     Backup
	// Console serves the browser console under /console (package server/console).
	// Default: those paths answer 404.
	Console http.Handler
	// Native serves the native API at the root paths (apps, workflows, events; docs/protocol.md,
	// "Native workflows") with the project's token. Default: those routes answer 404.
	Native Native
	// Live serves the live run streams (GET /runs/{id}/events, GET /runs/stream) and is
	// closed by Shutdown; it must be the engine's delivery.Config.Runs. Default: those
	// routes answer 404.
	Live *live.Hub
	// TokenlessProject, when set, is the project of native-API requests (the root paths: apps,
	// workflows, events, runs, flow-state) that carry no Authorization header, so `curl
	// "$DURATON_URL/flow-state"` works in `duraton dev` (docs/protocol.md, "Native workflows"). A
	// request with a token is still checked. Only dev mode sets it; default empty: every request
	// needs a token.
	TokenlessProject string
	// LocalHostsOnly (dev mode) refuses (403) every request whose Host is not this
	// machine's: localhost, a name under .localhost, a loopback address or ListenHost
	// (the host of the listen address; when that is empty or all interfaces, any IP
	// address), so that another site's name re-pointed at this address (DNS rebinding)
	// reaches nothing. Default false.
	LocalHostsOnly bool
	ListenHost     string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives request errors. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.MaxWorkflowBodyBytes == 0 {
		c.MaxWorkflowBodyBytes = 10 << 20
	}
	if c.MaxBatchMessages == 0 {
		c.MaxBatchMessages = 1000
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = 16 << 20
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 100
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = 15 * time.Minute
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = 365 * 24 * time.Hour
	}
	if c.FailedAuthBurst == 0 {
		c.FailedAuthBurst = 100
	}
	if c.TokenCacheTTL == 0 {
		c.TokenCacheTTL = 5 * time.Second
	}
	if c.MaxHops == 0 {
		c.MaxHops = 8
	}
	if c.HookRate == 0 {
		c.HookRate = 20
	}
	if c.HookBurst == 0 {
		c.HookBurst = 100
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = 64 << 10
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 60 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 60 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 120 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate reports every invalid field of a defaulted Config, each error naming it.
func (c Config) validate() error {
	var errs []error
	if c.CheckDestination == nil {
		errs = append(errs, errors.New("server: Config.CheckDestination is required"))
	}
	negative := func(name string, v any, neg bool) {
		if neg {
			errs = append(errs, fmt.Errorf("server: Config.%s must not be negative (zero takes the default), got %v", name, v))
		}
	}
	negative("MaxBodyBytes", c.MaxBodyBytes, c.MaxBodyBytes < 0)
	negative("MaxWorkflowBodyBytes", c.MaxWorkflowBodyBytes, c.MaxWorkflowBodyBytes < 0)
	negative("MaxBatchMessages", c.MaxBatchMessages, c.MaxBatchMessages < 0)
	negative("MaxBatchBytes", c.MaxBatchBytes, c.MaxBatchBytes < 0)
	negative("MaxRetries", c.MaxRetries, c.MaxRetries < 0)
	negative("MaxTimeout", c.MaxTimeout, c.MaxTimeout < 0)
	negative("MaxDelay", c.MaxDelay, c.MaxDelay < 0)
	negative("FailedAuthBurst", c.FailedAuthBurst, c.FailedAuthBurst < 0)
	negative("TokenCacheTTL", c.TokenCacheTTL, c.TokenCacheTTL < 0)
	negative("MaxHeaderBytes", c.MaxHeaderBytes, c.MaxHeaderBytes < 0)
	negative("ReadHeaderTimeout", c.ReadHeaderTimeout, c.ReadHeaderTimeout < 0)
	negative("ReadTimeout", c.ReadTimeout, c.ReadTimeout < 0)
	negative("WriteTimeout", c.WriteTimeout, c.WriteTimeout < 0)
	negative("IdleTimeout", c.IdleTimeout, c.IdleTimeout < 0)
	negative("MaxHops", c.MaxHops, c.MaxHops < 0)
	negative("HookRate", c.HookRate, c.HookRate < 0)
	negative("HookBurst", c.HookBurst, c.HookBurst < 0)
	return errors.Join(errs...)
}

// maxHookClients bounds the client addresses the webhook rate limit tracks.
const maxHookClients = 10_000

// Server serves the API.
type Server struct {
	cfg      Config
	echo     *echo.Echo
	http     *http.Server
	draining atomic.Bool // /readyz answers 503 once set
}

// New builds the server and registers every route on engine.
func New(cfg Config, engine *delivery.Engine) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "server")
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(log)
	e.IPExtractor = clientIP(cfg.ForwardSecret) // X-Forwarded-For only from a replica
	e.JSONSerializer = compactSerializer{}
	if cfg.LocalHostsOnly {
		e.Pre(localHostOnly(cfg.ListenHost))
	}

	auth := &authenticator{tokens: engine, known: map[string]knownToken{}, ttl: cfg.TokenCacheTTL, now: cfg.Now,
		limit: authlimit.New(cfg.FailedAuthBurst, time.Minute, cfg.Now)}
	v2 := e.Group("/v2", auth.middleware, hopLimit(cfg.MaxHops))

	limits := cfg.publishLimits()
	publish := &publishHandlers{engine: engine, cfg: cfg, limits: limits, groups: cfg.URLGroups}
	publish.register(v2)
	// Deliveries to a run's workflow URL offer the inline answer (inline.go); its steps
	// are parsed as a /v2/batch body is.
	if err := engine.AcceptInlineSteps(publish.inlineSteps, cfg.MaxBatchBytes); err != nil {
		return nil, err
	}
	(&scheduleHandlers{schedules: cfg.Schedules, publish: publish}).register(v2)
	(&urlGroupHandlers{groups: cfg.URLGroups, publish: publish}).register(v2)
	(&messageHandlers{engine: engine}).register(v2)
	(&logHandlers{engine: engine}).register(v2)
	wfDLQ := &workflowDLQHandlers{engine: engine}
	wfDLQ.register(v2)
	(&dlqHandlers{engine: engine, workflow: wfDLQ}).register(v2)
	hooks := newHookLimiter(cfg.HookRate, cfg.HookBurst, maxHookClients, cfg.Now)
	(&workflowHandlers{engine: engine, cfg: cfg, limits: limits, hooks: hooks}).register(v2, e)
	(&runLogHandlers{engine: engine}).register(v2)
	(&flowControlHandlers{engine: engine}).register(v2)
	(&queueHandlers{engine: engine}).register(v2)
	(&keyHandlers{engine: engine}).register(v2)
	e.GET("/ai/prices", aiPrices(engine), auth.tokenless(cfg.TokenlessProject), hopLimit(cfg.MaxHops))
	(&nativeHandlers{native: cfg.Native, cfg: cfg}).register(e.Group("", auth.tokenless(cfg.TokenlessProject), hopLimit(cfg.MaxHops)))
	s := &Server{cfg: cfg, echo: e}
	(&healthHandlers{engine: engine, draining: &s.draining}).register(e)
	e.GET("/metrics", s.metrics)
	(&backupHandlers{token: cfg.AdminToken, backup: cfg.Backup, log: log}).register(e)
	e.Any("/console", s.console)
	e.Any("/console/*", s.console)
	s.http = HTTPServer(cfg, e)
	return s, nil
}

// HTTPServer is an http.Server serving h with cfg's header limit and timeouts (zero
// fields take New's defaults): New's own, and a replica's, whose listener serves the
// follower's forwarder before it leads.
func HTTPServer(cfg Config, h http.Handler) *http.Server {
	cfg = cfg.withDefaults()
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.With("component", "server").Handler(), slog.LevelWarn),
	}
}

// metrics serves the Prometheus exposition when it is configured.
func (s *Server) metrics(c echo.Context) error {
	if s.cfg.Metrics == nil {
		return notFound("metrics are not enabled")
	}
	s.cfg.Metrics.ServeHTTP(c.Response(), c.Request())
	return nil
}

// console hands /console to the console, which does its own sessions and CSRF checks.
func (s *Server) console(c echo.Context) error {
	if s.cfg.Console == nil {
		return notFound("the console is not enabled")
	}
	s.cfg.Console.ServeHTTP(c.Response(), c.Request())
	return nil
}

// Handler is the server's http.Handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.echo }

// Routes lists "METHOD path" of every registered route, in echo's path syntax.
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.echo.Routes() {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// Serve answers requests on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// Shutdown stops accepting requests and waits for those in progress until ctx ends.
// /readyz answers 503 from here on, to requests still arriving on open connections.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	if s.cfg.Live != nil {
		s.cfg.Live.Close() // streams never end by themselves
	}
	return s.http.Shutdown(ctx)
}

// Close closes every connection at once, idle or not.
func (s *Server) Close() error { return s.http.Close() }

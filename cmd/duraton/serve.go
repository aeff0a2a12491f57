package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/delivery/native"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/delivery/schedule"
	"github.com/duraton/duraton/delivery/urlgroup"
	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/server/console"
	"github.com/duraton/duraton/server/live"
	"github.com/duraton/duraton/server/metrics"
	"github.com/duraton/duraton/server/tracing"
	"github.com/duraton/duraton/storage"
)

// Fixed development credentials. They are the same as the QStash dev server's, so an
// app already set up for that works unchanged; the token decodes to
// {"UserID":"defaultUser","Password":"defaultPassword"} (the workflow SDK reads UserID).
const (
	devProject    = "default"
	devToken      = "eyJVc2VySUQiOiJkZWZhdWx0VXNlciIsIlBhc3N3b3JkIjoiZGVmYXVsdFBhc3N3b3JkIn0="
	devCurrentKey = "sig_7kYjw48mhY7kAjqNGcy6cr29RJ6r"
	devNextKey    = "sig_5ZB6DVzB1wjE8S6rZ7eenA8Pdnhs"
)

func dataFile(dir string) string { return filepath.Join(dir, "duraton.db") }

// runServer runs `dev` or `serve` until ctx ends. Shutdown order: stop accepting HTTP
// requests (in-progress ones finish, so every acknowledged publish is committed), stop
// the scheduler (no new ticks), the engine (drain in-flight attempts up to the drain
// timeout), then close the store. With --store postgres://... it runs as one replica of
// several instead (replica.go).
func runServer(ctx context.Context, m mode, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	f, err := parseServerFlags(m, args, stderr, getenv)
	if err != nil {
		return err
	}
	log := newLogger(f, stderr)
	if f.Store != "" {
		return runReplica(ctx, f, stdout, log)
	}
	self, policy := destinationPolicy(m, f)
	mtr := metrics.New(dataFile(f.DataDir))
	store, err := openStore(f.DataDir, storage.Options{OnCommit: mtr.OnCommit, CheckpointBytes: f.CheckpointBytes})
	if err != nil {
		return err
	}
	defer store.Close()

	if err := claimDataDir(m, f.DataDir, f.SwitchMode, store, stdout); err != nil {
		return err
	}
	n, err := newNode(ctx, nodeDeps{m: m, f: f, store: store, policy: policy, mtr: mtr, log: log, now: time.Now, stdout: stdout})
	if err != nil {
		return err
	}
	ln, err := listen(f.Addr, self)
	if err != nil {
		return err
	}
	if err := n.start(ctx); err != nil {
		ln.Close()
		return err
	}

	baseURL := "http://" + ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); m == modeDev && ok && !tcp.IP.IsLoopback() {
		log.Warn("dev mode listens beyond loopback: its token and signing keys are public and its native API needs no token, so anyone who reaches this address can use the server; use `duraton serve` for anything but local development",
			"addr", ln.Addr().String())
	}
	if m == modeDev {
		fmt.Fprintf(stdout, "export QSTASH_URL=%s\nexport QSTASH_TOKEN=%s\nexport QSTASH_CURRENT_SIGNING_KEY=%s\nexport QSTASH_NEXT_SIGNING_KEY=%s\n",
			baseURL, n.token, n.project.CurrentSigningKey, n.project.NextSigningKey)
		// The native API's and the CLI verbs' names for the same URL and token.
		fmt.Fprintf(stdout, "export DURATON_URL=%s\nexport DURATON_TOKEN=%s\n", baseURL, n.token)
	} else {
		fmt.Fprintf(stdout, "listening on %s\n", baseURL)
	}
	log.Info("duraton listening", "mode", string(m), "url", baseURL, "data", store.Path())

	serveErr := make(chan error, 1)
	go func() { serveErr <- n.srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if serr := n.srv.Shutdown(shutCtx); serr != nil {
		log.Warn("http shutdown", "err", serr)
	}
	n.stop()
	return err
}

// listen listens on addr and adds the address to self: deliveries never loop into our
// own API.
func listen(addr string, self *netguard.SelfAddrs) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if err := self.Add(ln.Addr().String()); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// destinationPolicy decides where deliveries may connect: public addresses, the
// allow-listed CIDRs, loopback in dev mode, never this server itself (its listening
// address is added to self once known).
func destinationPolicy(m mode, f serverFlags) (*netguard.SelfAddrs, netguard.Policy) {
	allow, _ := parseCIDRs(f.AllowCIDRs)
	if m == modeDev {
		allow = append(allow, netguard.LoopbackPrefixes()...)
	}
	self := &netguard.SelfAddrs{}
	return self, netguard.Policy{Allow: allow, Self: self}
}

// nodeDeps is what a node is built from.
type nodeDeps struct {
	m      mode
	f      serverFlags
	store  *storage.Store
	policy netguard.Policy
	mtr    *metrics.Metrics
	log    *slog.Logger
	now    func() time.Time // the clock of every decision (a replica's is the database's)
	stdout io.Writer
	// forwardSecret: the replicas' shared secret, whose holders' X-Forwarded-For is
	// trusted ("" outside replicas).
	forwardSecret string
	// observer counts the engine's work (default mtr); a shard's counts it by shard too.
	observer delivery.Observer
	// noDefault: the store is a shard that project default does not belong to, so it
	// is not made here.
	noDefault bool
}

// node is one running Duraton over a store: the delivery engine, schedules, native
// workflows and the HTTP server.
type node struct {
	engine  *delivery.Engine
	sched   *schedule.Scheduler
	nat     *native.Service
	srv     *server.Server
	traces  *tracing.Exporter // nil without --otlp-endpoint
	log     *slog.Logger
	token   string // the default project's token (dev: always; serve: when just made)
	project *delivery.Project
	unwatch func() // removes the engine from the metrics' gauges
}

// newNode makes sure the default project exists and builds the node (not started).
func newNode(ctx context.Context, d nodeDeps) (*node, error) {
	m, f, store, log := d.m, d.f, d.store, d.log
	token, project := "", &delivery.Project{ID: devProject}
	var err error
	if !d.noDefault {
		if token, project, err = ensureDefaultProject(ctx, m, f, store); err != nil {
			return nil, err
		}
	}
	if m == modeServe && token != "" {
		// Printed as soon as it is stored: if the start fails below, it is not lost.
		fmt.Fprintf(d.stdout, "created project %q; its API token (shown once): %s\n", project.ID, token)
	}
	if m == modeServe && f.Token != "" && !d.noDefault {
		if err := warnOtherTokens(store, f.Token, log); err != nil {
			return nil, err
		}
	}
	hub := live.New(live.Config{}) // the live run streams, told of changes by the engine
	var traces *tracing.Exporter   // nil: no --otlp-endpoint, no tracing cost
	var tracer delivery.Tracer
	if f.OTLPEndpoint != "" {
		if traces, err = tracing.New(ctx, tracing.Config{Endpoint: f.OTLPEndpoint, Logger: log}); err != nil {
			return nil, err
		}
		tracer = traces
	}
	engineCfg := delivery.Config{
		MaxInFlight:    f.MaxInFlight,
		ProjectCeiling: f.ProjectCeiling,
		ProjectShare:   f.ProjectShare,
		MaxFlowKeys:    f.MaxFlowKeys,
		DefaultTimeout: f.DefaultTimeout,
		DrainTimeout:   f.DrainTimeout,
		Destinations:   d.policy,
		AIPrices:       f.AIPrices,
		Observer:       cmp.Or[delivery.Observer](d.observer, d.mtr),
		Runs:           delivery.Watchers(hub, watcherOf(traces)),
		Tracer:         tracer,
		Now:            d.now,
		Logger:         log,
	}
	f.Retention.apply(&engineCfg)
	engine, err := delivery.New(engineCfg, store)
	if err != nil {
		return nil, err
	}
	unwatch := d.mtr.WatchEngine(engine.Stats)
	sched := schedule.New(schedule.Config{Now: d.now, Logger: log}, store, engine)
	nat, err := native.New(native.Config{
		CheckURL: d.policy.CheckURL, Now: d.now, Logger: log,
		MaxRunsPerRequest: f.MaxRunsPerRequest, MaxRunsInFlight: f.EventRunsInFlight,
	}, store, engine)
	if err != nil {
		return nil, err
	}
	if traces != nil {
		traces.ReadRuns(nat)
	}
	cons, err := console.New(console.Config{
		Dev: m == modeDev, DevProject: project.ID, Logger: log, Native: nat, SecureCookie: f.secureCookies(), Live: hub,
		ProjectForToken: func(ctx context.Context, token string) (string, error) {
			return engine.ProjectForToken(ctx, server.TokenHash(token))
		},
	}, engine)
	if err != nil {
		return nil, err
	}
	var backup server.Backup
	if store.Path() != "" {
		backup = store.Backup // on PostgreSQL, pg_dump does it
	}
	srv, err := server.New(server.Config{
		MaxBodyBytes:         f.MaxBodyBytes,
		MaxWorkflowBodyBytes: f.MaxWorkflowBodyBytes,
		HookRate:             float64(f.HookRate),
		HookBurst:            int(5 * f.HookRate),
		CheckDestination:     d.policy.CheckURL,
		Metrics:              d.mtr.Handler(f.MetricsToken),
		Schedules:            sched,
		URLGroups:            urlgroup.New(urlgroup.Config{}, store),
		Native:               nat,
		TokenlessProject:     tokenlessProject(m, project.ID),
		LocalHostsOnly:       m == modeDev, // its credentials are public: no DNS rebinding
		ListenHost:           listenHost(f.Addr),
		AdminToken:           f.AdminToken,
		ForwardSecret:        d.forwardSecret,
		Backup:               backup,
		Console:              cons,
		Live:                 hub,
		Logger:               log,
	}, engine)
	if err != nil {
		return nil, err
	}
	return &node{engine: engine, sched: sched, nat: nat, srv: srv, traces: traces, log: log, token: token, project: project, unwatch: unwatch}, nil
}

// start starts the engine, the schedules and the native flusher.
func (n *node) start(ctx context.Context) error {
	if err := n.engine.Start(ctx); err != nil {
		return err
	}
	if err := n.sched.Start(ctx); err != nil {
		n.engine.Stop()
		return err
	}
	if err := n.nat.Start(ctx); err != nil { // fires debounce and batch deadlines, also those passed while down
		n.sched.Stop()
		n.engine.Stop()
		return err
	}
	return nil
}

// stop stops what start started, the engine last (it drains in-flight attempts).
func (n *node) stop() {
	n.nat.Stop()
	n.sched.Stop()
	n.engine.Stop()
	n.unwatch()
	if n.traces != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := n.traces.Close(ctx); err != nil { // flushes the spans made
			n.log.Warn("trace export at shutdown", "err", err)
		}
	}
}

// watcherOf is traces as a RunWatcher, nil (not a typed nil) without tracing.
func watcherOf(traces *tracing.Exporter) delivery.RunWatcher {
	if traces == nil {
		return nil
	}
	return traces
}

// listenHost is the host part of a listen address ("" for all interfaces).
func listenHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return host
}

// tokenlessProject is the project tokenless native-API requests run as: the dev project
// in dev mode, none (a token is required) in serve mode.
func tokenlessProject(m mode, project string) string {
	if m == modeDev {
		return project
	}
	return ""
}

// ensureDefaultProject makes sure the project "default" exists. In dev mode it has the
// fixed dev credentials; in serve mode the configured ones, generated when absent. It
// returns the token to show: always in dev mode, only when just generated in serve mode.
func ensureDefaultProject(ctx context.Context, m mode, f serverFlags, store *storage.Store) (string, *delivery.Project, error) {
	p := delivery.Project{ID: devProject, Name: devProject, CreatedAt: time.Now().UnixMilli()}
	token, show := f.Token, false
	switch m {
	case modeDev:
		p.CurrentSigningKey, p.NextSigningKey, token, show = devCurrentKey, devNextKey, devToken, true
		p.UserID = "defaultUser" // the UserID inside devToken
	case modeServe:
		p.CurrentSigningKey, p.NextSigningKey = f.CurrentKey, f.NextKey
		if p.CurrentSigningKey == "" {
			p.CurrentSigningKey = delivery.NewSigningKey()
		}
		if p.NextSigningKey == "" {
			p.NextSigningKey = delivery.NewSigningKey()
		}
		projects, err := delivery.ListProjects(ctx, store)
		if err != nil {
			return "", nil, err
		}
		var tokens []storage.TokenEntry
		if err := store.View(func(tx *storage.Tx) (err error) { tokens, err = tx.Tokens(); return err }); err != nil {
			return "", nil, err
		}
		if len(projects) > 0 && len(tokens) > 0 && token == "" {
			return "", &projects[0], nil // already set up; tokens were printed when made
		}
		if token == "" {
			token, show = newToken(devProject), true
		}
	}
	stored, err := delivery.EnsureProject(ctx, store, p, server.TokenHash(token))
	if err != nil {
		return "", nil, err
	}
	if !show {
		token = ""
	}
	return token, stored, nil
}

// warnOtherTokens says when project default has tokens besides --token: --token adds a
// token, so one given before (perhaps leaked) stays valid until it is revoked.
func warnOtherTokens(store *storage.Store, token string, log *slog.Logger) error {
	var tokens []storage.TokenEntry
	if err := store.View(func(tx *storage.Tx) (err error) { tokens, err = tx.Tokens(); return err }); err != nil {
		return err
	}
	own, others := server.TokenHash(token), 0
	for _, t := range tokens {
		if t.Project == devProject && t.Hash != own {
			others++
		}
	}
	if others > 0 {
		log.Warn("project default has API tokens besides --token, which stay valid until revoked: see duraton tokens list, duraton tokens revoke",
			"other_tokens", others)
	}
	return nil
}

// newToken makes an API token in the form the workflow SDK can read its user id from:
// base64 of {"UserID": project, "Password": 32 random bytes in hex}.
func newToken(project string) string {
	var secret [32]byte
	_, _ = rand.Read(secret[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	raw, _ := json.Marshal(map[string]string{"UserID": project, "Password": hex.EncodeToString(secret[:])})
	return base64.StdEncoding.EncodeToString(raw)
}

// discardLogger is for commands that run components quietly.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

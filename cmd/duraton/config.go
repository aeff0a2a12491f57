package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

var errUsage = errors.New("usage")

// loadAIPrices reads and validates a price file, refusing one over the size limit
// before reading it whole.
func loadAIPrices(path string) (*flowctl.AIPrices, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, flowctl.MaxPriceFileSize+1))
	if err != nil {
		return nil, err
	}
	return flowctl.ParseAIPrices(data)
}

type mode string

const (
	modeDev   mode = "dev"
	modeServe mode = "serve"
)

// serverFlags is everything `dev` and `serve` read from flags and DURATON_* variables.
// A flag wins over its variable; the variable wins over the default.
type serverFlags struct {
	Addr         string
	DataDir      string
	Token        string
	CurrentKey   string
	NextKey      string
	AllowCIDRs   string
	MetricsToken string
	AdminToken   string
	MaxBodyBytes int64
	// MaxWorkflowBodyBytes caps a workflow message's body (server.Config).
	MaxWorkflowBodyBytes int64
	// CheckpointBytes is the write-ahead log's checkpoint size (storage.Options).
	CheckpointBytes int64
	MaxInFlight     int
	ProjectCeiling  int
	ProjectShare    int
	MaxFlowKeys     int
	// MaxRunsPerRequest and EventRunsInFlight bound the workflow runs of POST /events
	// (native.Config).
	MaxRunsPerRequest int
	EventRunsInFlight int
	DefaultTimeout    time.Duration
	DrainTimeout      time.Duration
	HookRate          int64
	Retention         retention
	LogLevel          string
	LogFormat         string
	// AIPricesFile names the AI price table (--ai-prices); AIPrices is that file, read
	// and validated.
	AIPricesFile string
	AIPrices     *flowctl.AIPrices
	// OTLPEndpoint is the OTLP/HTTP traces URL runs are exported to (--otlp-endpoint);
	// empty: no traces.
	OTLPEndpoint string
	// PublicURL is the base URL browsers reach this server at (serve only; default "":
	// unknown). An https:// one marks the console's session cookie Secure, for a server
	// behind a proxy that terminates TLS.
	PublicURL string
	// SwitchMode lets dev open a data directory made by serve, or the other way round.
	SwitchMode bool
	// Replicas on PostgreSQL (serve only): Store is the database's URL ("" = bbolt in
	// DataDir); Advertise the base URL other replicas forward requests to (default
	// http://<listen address>); LeaseTTL and LeaseGrace the shard leases (replica.go);
	// PGMaxConns the connection pool's size; Shards the shard count a database made by
	// this replica gets.
	Store      string
	Advertise  string
	LeaseTTL   time.Duration
	LeaseGrace time.Duration
	PGMaxConns int
	Shards     int
	// FollowerBufferBytes caps the request bodies a follower holds at once.
	FollowerBufferBytes int64
}

// Token lengths: a token is a bearer secret, so a short one is guessable.
const (
	minTokenLen = 32
	maxTokenLen = 1024
)

// validateToken refuses tokens that are too short, too long or would not survive an
// Authorization header.
func validateToken(flagName, token string) error {
	if len(token) < minTokenLen || len(token) > maxTokenLen {
		return fmt.Errorf("%s must be %d to %d characters long (it has %d); leave it empty to have one generated", flagName, minTokenLen, maxTokenLen, len(token))
	}
	for _, c := range []byte(token) {
		if c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%s may hold only printable ASCII characters without spaces", flagName)
		}
	}
	return nil
}

// env is a flag default taken from the environment.
type env func(string) string

func (e env) str(name, def string) string {
	if v := e(name); v != "" {
		return v
	}
	return def
}

// envDefaults reads flag defaults from DURATON_* variables. A variable that is set but
// malformed is an error naming it, never a silent fall-back to the default: the first
// one is kept in err.
type envDefaults struct {
	env
	err error
}

func (e *envDefaults) int64(name string, def int64) int64 {
	v := e.env(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		e.fail(fmt.Errorf("%s: %q is not an integer", name, v))
		return def
	}
	return n
}

func (e *envDefaults) duration(name string, def time.Duration) time.Duration {
	v := e.env(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		e.fail(fmt.Errorf("%s: %q is not a duration (want e.g. 30s, 5m)", name, v))
		return def
	}
	return d
}

func (e *envDefaults) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

func parseServerFlags(m mode, args []string, stderr io.Writer, getenv func(string) string) (serverFlags, error) {
	e := &envDefaults{env: getenv}
	var f serverFlags
	fs := flag.NewFlagSet(string(m), flag.ContinueOnError)
	fs.SetOutput(stderr)
	defAddr, defData := "127.0.0.1:8080", ".duraton"
	if m == modeServe {
		defAddr, defData = ":8080", "duraton-data"
	}
	fs.StringVar(&f.Addr, "addr", e.str("DURATON_ADDR", defAddr), "listen address (DURATON_ADDR)")
	fs.StringVar(&f.DataDir, "data", e.str("DURATON_DATA", defData), "data directory holding duraton.db (DURATON_DATA)")
	fs.StringVar(&f.LogLevel, "log-level", e.str("DURATON_LOG_LEVEL", "info"), "debug, info, warn or error (DURATON_LOG_LEVEL)")
	fs.StringVar(&f.LogFormat, "log-format", e.str("DURATON_LOG_FORMAT", "text"), "text or json (DURATON_LOG_FORMAT)")
	fs.Int64Var(&f.MaxBodyBytes, "max-body-bytes", e.int64("DURATON_MAX_BODY_BYTES", 1<<20), "largest message body accepted; the default is QStash's Free plan's (DURATON_MAX_BODY_BYTES)")
	fs.Int64Var(&f.MaxWorkflowBodyBytes, "max-workflow-body-bytes", e.int64("DURATON_MAX_WORKFLOW_BODY_BYTES", 10<<20), "largest body of a workflow message: a run's trigger or a step it publishes; the default is QStash's Pay-as-you-go plan's (DURATON_MAX_WORKFLOW_BODY_BYTES)")
	fs.Int64Var(&f.CheckpointBytes, "checkpoint-bytes", e.int64("DURATON_CHECKPOINT_BYTES", 1<<20), "write-ahead log bytes between checkpoints into duraton.db; the log needs about five times this of disk and memory (DURATON_CHECKPOINT_BYTES)")
	var maxInFlight int64
	fs.Int64Var(&maxInFlight, "max-in-flight", e.int64("DURATON_MAX_IN_FLIGHT", 512), "concurrent delivery attempts (DURATON_MAX_IN_FLIGHT)")
	var ceiling int64
	fs.Int64Var(&ceiling, "project-ceiling", e.int64("DURATON_PROJECT_CEILING", 0), "deliveries of one project in flight at once, across all keys; 0 = no ceiling (DURATON_PROJECT_CEILING)")
	var share int64
	fs.Int64Var(&share, "project-share", e.int64("DURATON_PROJECT_SHARE", 0), "most deliveries one project may have in flight of --max-in-flight, so a project whose endpoints hang cannot starve the others; 0 = half of --max-in-flight (DURATON_PROJECT_SHARE)")
	var maxKeys int64
	fs.Int64Var(&maxKeys, "max-flow-keys", e.int64("DURATON_MAX_FLOW_KEYS", 100_000), "flow-control keys one project may have active at once (DURATON_MAX_FLOW_KEYS)")
	var runsPerRequest, runsInFlight int64
	fs.Int64Var(&runsPerRequest, "max-runs-per-request", e.int64("DURATON_MAX_RUNS_PER_REQUEST", 1000), "workflow runs one POST /events may start, one per event and workflow it triggers; more is refused with 413 (DURATON_MAX_RUNS_PER_REQUEST)")
	fs.Int64Var(&runsInFlight, "event-runs-in-flight", e.int64("DURATON_EVENT_RUNS_IN_FLIGHT", 2000), "workflow runs one project's event requests may be creating at once; a request that would go over is refused with 429 (DURATON_EVENT_RUNS_IN_FLIGHT)")
	fs.DurationVar(&f.DefaultTimeout, "default-timeout", e.duration("DURATON_DEFAULT_TIMEOUT", 30*time.Second), "attempt timeout when a message sets none (DURATON_DEFAULT_TIMEOUT)")
	fs.DurationVar(&f.DrainTimeout, "drain-timeout", e.duration("DURATON_DRAIN_TIMEOUT", 10*time.Second), "how long shutdown waits for in-flight attempts (DURATON_DRAIN_TIMEOUT)")
	fs.BoolVar(&f.SwitchMode, "switch-mode", false, "open a data directory created by the other mode (dev/serve) and hand it over to this one")
	fs.Int64Var(&f.HookRate, "hook-rate", e.int64("DURATON_HOOK_RATE", 20), "webhook calls per second one client address (IPv6: /64) may make, bursts of 5x (DURATON_HOOK_RATE)")
	f.Retention.flags(fs, e)
	fs.StringVar(&f.AIPricesFile, "ai-prices", e.env("DURATON_AI_PRICES"), "JSON file of AI prices, USD per million input and output tokens per model: {\"models\": {\"gpt-4o-mini\": {\"input\": 0.15, \"output\": 0.6}}}; empty = no prices (DURATON_AI_PRICES)")
	fs.StringVar(&f.OTLPEndpoint, "otlp-endpoint", e.env("DURATON_OTLP_ENDPOINT"), "OTLP/HTTP traces URL (e.g. http://127.0.0.1:4318/v1/traces): each workflow run is exported as an OpenTelemetry trace and deliveries carry traceparent; empty = off (DURATON_OTLP_ENDPOINT)")
	fs.StringVar(&f.AdminToken, "admin-token", e.env("DURATON_ADMIN_TOKEN"), "token for GET /admin/backup (duraton backup); empty = backups off (DURATON_ADMIN_TOKEN)")
	var pgConns, shards int64 = 16, 16
	if m == modeServe {
		fs.StringVar(&f.Token, "token", e.env("DURATON_TOKEN"), "API token bound to project \"default\" (DURATON_TOKEN); generated and printed on first start if empty")
		fs.StringVar(&f.CurrentKey, "current-signing-key", e.env("DURATON_CURRENT_SIGNING_KEY"), "current signing key of project \"default\" at creation (DURATON_CURRENT_SIGNING_KEY); generated if empty")
		fs.StringVar(&f.NextKey, "next-signing-key", e.env("DURATON_NEXT_SIGNING_KEY"), "next signing key of project \"default\" at creation (DURATON_NEXT_SIGNING_KEY); generated if empty")
		fs.StringVar(&f.MetricsToken, "metrics-token", e.env("DURATON_METRICS_TOKEN"), "bearer token a /metrics scrape must send; empty = /metrics is open (DURATON_METRICS_TOKEN)")
		fs.StringVar(&f.AllowCIDRs, "allow-cidrs", e.env("DURATON_ALLOW_CIDRS"), "comma-separated CIDRs that destinations may resolve to despite being private/loopback (DURATON_ALLOW_CIDRS)")
		fs.StringVar(&f.Store, "store", e.env("DURATON_STORE"), "postgres://... to share a PostgreSQL database with other replicas; empty = bbolt in --data (DURATON_STORE)")
		fs.StringVar(&f.PublicURL, "public-url", e.env("DURATON_PUBLIC_URL"), "base URL browsers reach this server at, e.g. https://duraton.example.com behind a TLS-terminating proxy; https:// marks the console cookie Secure; empty = Secure only on a TLS connection (DURATON_PUBLIC_URL)")
		fs.StringVar(&f.Advertise, "advertise", e.env("DURATON_ADVERTISE"), "base URL other replicas reach this one at, to forward requests for the shards it leads; default http://<listen address> (DURATON_ADVERTISE)")
		fs.DurationVar(&f.LeaseTTL, "lease-ttl", e.duration("DURATON_LEASE_TTL", 10*time.Second), "shard lease length on PostgreSQL: a dead replica's shards are taken over after this plus --lease-grace (DURATON_LEASE_TTL)")
		fs.DurationVar(&f.LeaseGrace, "lease-grace", e.duration("DURATON_LEASE_GRACE", 2*time.Second), "wait after a lease expires before taking it over (DURATON_LEASE_GRACE)")
		fs.Int64Var(&f.FollowerBufferBytes, "follower-buffer-bytes", e.int64("DURATON_FOLLOWER_BUFFER_BYTES", 128<<20), "bytes of request bodies a follower replica holds at once before forwarding them; more is refused with 503 (DURATON_FOLLOWER_BUFFER_BYTES)")
		fs.Int64Var(&pgConns, "pg-max-conns", e.int64("DURATON_PG_MAX_CONNS", 16), "PostgreSQL connections per replica (DURATON_PG_MAX_CONNS)")
		fs.Int64Var(&shards, "shards", e.int64("DURATON_SHARDS", 16), "shards a new PostgreSQL database is divided into, shared out among the replicas; set once, when the database is made (DURATON_SHARDS)")
	}
	// A malformed flag value is refused by fs.Parse, which names the flag on stderr.
	if err := fs.Parse(args); err != nil {
		return f, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", m, fs.Arg(0))
		return f, errUsage
	}
	// A malformed variable is refused even when a flag overrides it: it is a mistake in
	// the deployment either way.
	if e.err != nil {
		return f, e.err
	}
	if maxInFlight < 1 || maxInFlight > 100_000 {
		return f, fmt.Errorf("--max-in-flight (DURATON_MAX_IN_FLIGHT) must be between 1 and 100000, got %d", maxInFlight)
	}
	if ceiling < 0 || ceiling > 1_000_000 {
		return f, fmt.Errorf("--project-ceiling (DURATON_PROJECT_CEILING) must be between 0 and 1000000, got %d", ceiling)
	}
	if share < 0 || share > maxInFlight {
		return f, fmt.Errorf("--project-share (DURATON_PROJECT_SHARE) must be between 0 (half of --max-in-flight) and --max-in-flight (%d), got %d", maxInFlight, share)
	}
	if maxKeys < 1 || maxKeys > 10_000_000 {
		return f, fmt.Errorf("--max-flow-keys (DURATON_MAX_FLOW_KEYS) must be between 1 and 10000000, got %d", maxKeys)
	}
	f.MaxInFlight, f.ProjectCeiling, f.ProjectShare, f.MaxFlowKeys = int(maxInFlight), int(ceiling), int(share), int(maxKeys)
	if runsPerRequest < 1 || runsPerRequest > 100_000 {
		return f, fmt.Errorf("--max-runs-per-request (DURATON_MAX_RUNS_PER_REQUEST) must be between 1 and 100000, got %d", runsPerRequest)
	}
	if runsInFlight < runsPerRequest || runsInFlight > 1_000_000 {
		return f, fmt.Errorf("--event-runs-in-flight (DURATON_EVENT_RUNS_IN_FLIGHT) must be between --max-runs-per-request (%d) and 1000000, got %d", runsPerRequest, runsInFlight)
	}
	f.MaxRunsPerRequest, f.EventRunsInFlight = int(runsPerRequest), int(runsInFlight)
	if f.MaxBodyBytes < 1 || f.MaxBodyBytes > 64<<20 {
		return f, fmt.Errorf("--max-body-bytes (DURATON_MAX_BODY_BYTES) must be between 1 and %d, got %d", 64<<20, f.MaxBodyBytes)
	}
	if f.MaxWorkflowBodyBytes < 1 || f.MaxWorkflowBodyBytes > 64<<20 {
		return f, fmt.Errorf("--max-workflow-body-bytes (DURATON_MAX_WORKFLOW_BODY_BYTES) must be between 1 and %d, got %d", 64<<20, f.MaxWorkflowBodyBytes)
	}
	if f.CheckpointBytes < 4<<10 || f.CheckpointBytes > 1<<30 {
		return f, fmt.Errorf("--checkpoint-bytes (DURATON_CHECKPOINT_BYTES) must be between %d and %d, got %d", 4<<10, 1<<30, f.CheckpointBytes)
	}
	// One commit on a data file is bounded by storage.MaxCommitBytes: a message must fit
	// in it with room for the others of its group commit (a workflow step's body is
	// stored twice: in its message and in the run's history).
	if limit := storage.MaxCommitBytes(f.CheckpointBytes); f.Store == "" {
		if f.MaxBodyBytes > limit/4 {
			return f, fmt.Errorf("--max-body-bytes (%d) must be at most a quarter of the largest commit the data file takes (%d, 4 times --checkpoint-bytes, at least 64 MiB): raise --checkpoint-bytes", f.MaxBodyBytes, limit)
		}
		if f.MaxWorkflowBodyBytes > limit/4 {
			return f, fmt.Errorf("--max-workflow-body-bytes (%d) must be at most a quarter of the largest commit the data file takes (%d, 4 times --checkpoint-bytes, at least 64 MiB): raise --checkpoint-bytes", f.MaxWorkflowBodyBytes, limit)
		}
	}
	if f.HookRate < 1 || f.HookRate > 1_000_000 {
		return f, fmt.Errorf("--hook-rate must be between 1 and 1000000")
	}
	if f.DefaultTimeout <= 0 {
		return f, fmt.Errorf("--default-timeout (DURATON_DEFAULT_TIMEOUT) must be positive, got %s", f.DefaultTimeout)
	}
	if f.DrainTimeout < 0 {
		return f, fmt.Errorf("--drain-timeout (DURATON_DRAIN_TIMEOUT) must not be negative, got %s", f.DrainTimeout)
	}
	if strings.TrimSpace(f.Addr) == "" {
		return f, fmt.Errorf("--addr (DURATON_ADDR) must not be empty")
	}
	if strings.TrimSpace(f.DataDir) == "" {
		return f, fmt.Errorf("--data (DURATON_DATA) must not be empty")
	}
	for _, tok := range []struct{ flag, value string }{
		{"--token", f.Token}, {"--metrics-token", f.MetricsToken}, {"--admin-token", f.AdminToken},
	} {
		if tok.value != "" {
			if err := validateToken(tok.flag, tok.value); err != nil {
				return f, err
			}
		}
	}
	if err := f.Retention.validate(); err != nil {
		return f, err
	}
	f.PGMaxConns, f.Shards = int(pgConns), int(shards)
	if err := validateReplicaFlags(&f); err != nil {
		return f, err
	}
	if _, err := parseLevel(f.LogLevel); err != nil {
		return f, err
	}
	if f.LogFormat != "text" && f.LogFormat != "json" {
		return f, fmt.Errorf("--log-format (DURATON_LOG_FORMAT) must be text or json, got %q", f.LogFormat)
	}
	if _, err := parseCIDRs(f.AllowCIDRs); err != nil {
		return f, err
	}
	if err := checkPublicURL(f.PublicURL); err != nil {
		return f, err
	}
	if err := checkOTLPEndpoint(f.OTLPEndpoint); err != nil {
		return f, err
	}
	if f.AIPricesFile != "" {
		p, err := loadAIPrices(f.AIPricesFile)
		if err != nil {
			return f, fmt.Errorf("--ai-prices (DURATON_AI_PRICES) %s: %w", f.AIPricesFile, err)
		}
		f.AIPrices = p
	}
	return f, nil
}

// checkPublicURL refuses a --public-url that is not an http(s) base URL.
func checkPublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--public-url (DURATON_PUBLIC_URL) must be an http(s) base URL such as https://duraton.example.com, got %q", s)
	}
	return nil
}

// secureCookies reports whether the console's cookie is always Secure: the server is
// reached over HTTPS (--public-url https://...).
func (f serverFlags) secureCookies() bool { return strings.HasPrefix(f.PublicURL, "https://") }

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("--log-level (DURATON_LOG_LEVEL): %q is not debug, info, warn or error", s)
	}
	return l, nil
}

func parseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("--allow-cidrs (DURATON_ALLOW_CIDRS): %q is not a CIDR (want e.g. 10.0.0.0/8)", part)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func newLogger(f serverFlags, stderr io.Writer) *slog.Logger {
	level, _ := parseLevel(f.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if f.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(stderr, opts))
	}
	return slog.New(slog.NewTextHandler(stderr, opts))
}

// checkOTLPEndpoint refuses an --otlp-endpoint that is not an absolute http(s) URL.
func checkOTLPEndpoint(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--otlp-endpoint (DURATON_OTLP_ENDPOINT) %q: want an http:// or https:// URL", raw)
	}
	return nil
}

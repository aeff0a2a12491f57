package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

var errUsage = errors.New("usage")

type mode string

const (
	modeDev   mode = "dev"
	modeServe mode = "serve"
)

// serverFlags is everything `dev` and `serve` read from flags and DURATON_* variables.
// A flag wins over its variable; the variable wins over the default.
type serverFlags struct {
	Addr           string
	DataDir        string
	Token          string
	CurrentKey     string
	NextKey        string
	AllowCIDRs     string
	MetricsToken   string
	AdminToken     string
	MaxBodyBytes   int64
	MaxInFlight    int
	ProjectCeiling int
	DefaultTimeout time.Duration
	DrainTimeout   time.Duration
	Retention      retention
	LogLevel       string
	LogFormat      string
}

// env is a flag default taken from the environment.
type env func(string) string

func (e env) str(name, def string) string {
	if v := e(name); v != "" {
		return v
	}
	return def
}

func (e env) int64(name string, def int64) int64 {
	if v, err := strconv.ParseInt(e(name), 10, 64); err == nil {
		return v
	}
	return def
}

func (e env) duration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(e(name)); err == nil {
		return v
	}
	return def
}

func parseServerFlags(m mode, args []string, stderr io.Writer, getenv func(string) string) (serverFlags, error) {
	e := env(getenv)
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
	fs.Int64Var(&f.MaxBodyBytes, "max-body-bytes", e.int64("DURATON_MAX_BODY_BYTES", 1<<20), "largest message body accepted (DURATON_MAX_BODY_BYTES)")
	var maxInFlight int64
	fs.Int64Var(&maxInFlight, "max-in-flight", e.int64("DURATON_MAX_IN_FLIGHT", 512), "concurrent delivery attempts (DURATON_MAX_IN_FLIGHT)")
	var ceiling int64
	fs.Int64Var(&ceiling, "project-ceiling", e.int64("DURATON_PROJECT_CEILING", 0), "deliveries of one project in flight at once, across all keys; 0 = no ceiling (DURATON_PROJECT_CEILING)")
	fs.DurationVar(&f.DefaultTimeout, "default-timeout", e.duration("DURATON_DEFAULT_TIMEOUT", 30*time.Second), "attempt timeout when a message sets none (DURATON_DEFAULT_TIMEOUT)")
	fs.DurationVar(&f.DrainTimeout, "drain-timeout", e.duration("DURATON_DRAIN_TIMEOUT", 10*time.Second), "how long shutdown waits for in-flight attempts (DURATON_DRAIN_TIMEOUT)")
	f.Retention.flags(fs, e)
	fs.StringVar(&f.AdminToken, "admin-token", e("DURATON_ADMIN_TOKEN"), "token for GET /admin/backup (duraton backup); empty = backups off (DURATON_ADMIN_TOKEN)")
	if m == modeServe {
		fs.StringVar(&f.Token, "token", e("DURATON_TOKEN"), "API token bound to project \"default\" (DURATON_TOKEN); generated and printed on first start if empty")
		fs.StringVar(&f.CurrentKey, "current-signing-key", e("DURATON_CURRENT_SIGNING_KEY"), "current signing key of project \"default\" at creation (DURATON_CURRENT_SIGNING_KEY); generated if empty")
		fs.StringVar(&f.NextKey, "next-signing-key", e("DURATON_NEXT_SIGNING_KEY"), "next signing key of project \"default\" at creation (DURATON_NEXT_SIGNING_KEY); generated if empty")
		fs.StringVar(&f.MetricsToken, "metrics-token", e("DURATON_METRICS_TOKEN"), "bearer token a /metrics scrape must send; empty = /metrics is open (DURATON_METRICS_TOKEN)")
		fs.StringVar(&f.AllowCIDRs, "allow-cidrs", e("DURATON_ALLOW_CIDRS"), "comma-separated CIDRs that destinations may resolve to despite being private/loopback (DURATON_ALLOW_CIDRS)")
	}
	if err := fs.Parse(args); err != nil {
		return f, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", m, fs.Arg(0))
		return f, errUsage
	}
	f.MaxInFlight, f.ProjectCeiling = int(maxInFlight), int(ceiling)
	if f.ProjectCeiling < 0 || f.ProjectCeiling > 1_000_000 {
		return f, fmt.Errorf("--project-ceiling must be between 0 and 1000000")
	}
	if f.MaxBodyBytes < 1 || f.MaxBodyBytes > 64<<20 {
		return f, fmt.Errorf("--max-body-bytes must be between 1 and %d", 64<<20)
	}
	if f.MaxInFlight < 1 || f.MaxInFlight > 100_000 {
		return f, fmt.Errorf("--max-in-flight must be between 1 and 100000")
	}
	if f.DefaultTimeout <= 0 {
		return f, fmt.Errorf("--default-timeout must be positive")
	}
	if err := f.Retention.validate(); err != nil {
		return f, err
	}
	if _, err := parseLevel(f.LogLevel); err != nil {
		return f, err
	}
	if f.LogFormat != "text" && f.LogFormat != "json" {
		return f, fmt.Errorf("--log-format must be text or json, got %q", f.LogFormat)
	}
	if _, err := parseCIDRs(f.AllowCIDRs); err != nil {
		return f, err
	}
	return f, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("--log-level: %q is not debug, info, warn or error", s)
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
			return nil, fmt.Errorf("--allow-cidrs: %q is not a CIDR (want e.g. 10.0.0.0/8)", part)
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

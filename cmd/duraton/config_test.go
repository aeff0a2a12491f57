package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/stretchr/testify/require"
)

// envOf is a getenv over a fixed set of variables.
func envOf(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestParseServerFlagsDefaults(t *testing.T) {
	t.Parallel()
	f, err := parseServerFlags(modeServe, nil, &bytes.Buffer{}, envOf(nil))
	require.NoError(t, err)
	require.Equal(t, serverFlags{
		Addr: ":8080", DataDir: "duraton-data", MaxBodyBytes: 1 << 20, MaxWorkflowBodyBytes: 10 << 20, CheckpointBytes: 1 << 20, MaxInFlight: 512,
		DefaultTimeout: 30 * time.Second, DrainTimeout: 10 * time.Second, HookRate: 20, LogLevel: "info", LogFormat: "text", MaxFlowKeys: 100_000,
		MaxRunsPerRequest: 1000, EventRunsInFlight: 2000,
		Retention: retention{Logs: 7 * 24 * time.Hour, Runs: 7 * 24 * time.Hour, DLQ: 14 * 24 * time.Hour, Dedup: 10 * time.Minute, SweepInterval: time.Minute},
		LeaseTTL:  10 * time.Second, LeaseGrace: 2 * time.Second, PGMaxConns: 16, Shards: 16, FollowerBufferBytes: 128 << 20,
	}, f)
}

func TestReplicaFlags(t *testing.T) {
	t.Parallel()
	f, err := parseServerFlags(modeServe, []string{"--lease-ttl", "3s", "--advertise", "http://10.0.0.5:8080"}, &bytes.Buffer{},
		envOf(map[string]string{"DURATON_STORE": "postgres://u@db/duraton", "DURATON_PG_MAX_CONNS": "8"}))
	require.NoError(t, err)
	require.Equal(t, "postgres://u@db/duraton", f.Store)
	require.Equal(t, 3*time.Second, f.LeaseTTL)
	require.Equal(t, 2*time.Second, f.LeaseGrace)
	require.Equal(t, 8, f.PGMaxConns)
	require.Equal(t, "http://10.0.0.5:8080", f.Advertise)

	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--store", "mysql://db"}, "--store (DURATON_STORE) must be a postgres:// URL"},
		{[]string{"--store", "postgres://db/x", "--lease-ttl", "100ms"}, "--lease-ttl (DURATON_LEASE_TTL) must be between 1s and 5m"},
		{[]string{"--store", "postgres://db/x", "--shards", "0"}, "--shards (DURATON_SHARDS) must be between 1 and 1024"},
		{[]string{"--store", "postgres://db/x", "--lease-grace", "20s"}, "--lease-grace (DURATON_LEASE_GRACE) must be between 0 and --lease-ttl"},
		{[]string{"--store", "postgres://db/x", "--pg-max-conns", "1"}, "--pg-max-conns (DURATON_PG_MAX_CONNS) must be between 2 and 1000"},
		{[]string{"--store", "postgres://db/x", "--advertise", "10.0.0.5:8080"}, "--advertise (DURATON_ADVERTISE) must be an http(s) base URL"},
		{[]string{"--store", "postgres://db/x", "--follower-buffer-bytes", "1048576"}, "--follower-buffer-bytes (DURATON_FOLLOWER_BUFFER_BYTES) must be between 16777216 (the largest body)"},
	} {
		_, err := parseServerFlags(modeServe, tc.args, &bytes.Buffer{}, envOf(nil))
		require.ErrorContains(t, err, tc.wantErr, "%v", tc.args)
	}
	// dev has no replicas.
	_, err = parseServerFlags(modeDev, []string{"--store", "postgres://db/x"}, &bytes.Buffer{}, envOf(nil))
	require.ErrorIs(t, err, errUsage)
}

// TestPublicURLFlag: --public-url (DURATON_PUBLIC_URL) is validated, and an https://
// one makes the console cookie Secure.
func TestPublicURLFlag(t *testing.T) {
	t.Parallel()
	f, err := parseServerFlags(modeServe, nil, &bytes.Buffer{}, envOf(map[string]string{"DURATON_PUBLIC_URL": "https://duraton.example.com"}))
	require.NoError(t, err)
	require.Equal(t, "https://duraton.example.com", f.PublicURL)
	require.True(t, f.secureCookies())
	f, err = parseServerFlags(modeServe, []string{"--public-url", "http://10.0.0.5:8080/"}, &bytes.Buffer{}, envOf(nil))
	require.NoError(t, err)
	require.False(t, f.secureCookies(), "plain http: a browser would drop a Secure cookie")
	for _, bad := range []string{"duraton.example.com", "ftp://x", "https://", "https://u:p@x", "https://x/?a=1", "https://x/#f"} {
		_, err := parseServerFlags(modeServe, []string{"--public-url", bad}, &bytes.Buffer{}, envOf(nil))
		require.ErrorContains(t, err, "--public-url (DURATON_PUBLIC_URL) must be an http(s) base URL", bad)
	}
	_, err = parseServerFlags(modeDev, []string{"--public-url", "https://x"}, &bytes.Buffer{}, envOf(nil))
	require.ErrorIs(t, err, errUsage, "dev serves loopback only")
}

func TestParseServerFlagsFromEnvAndFlags(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{
		"DURATON_MAX_IN_FLIGHT": "64", "DURATON_DEFAULT_TIMEOUT": "5s", "DURATON_PROJECT_CEILING": "10",
		"DURATON_MAX_BODY_BYTES": "2048", "DURATON_DRAIN_TIMEOUT": "1m",
	})
	f, err := parseServerFlags(modeServe, []string{"-max-in-flight", "8"}, &bytes.Buffer{}, env)
	require.NoError(t, err)
	require.Equal(t, 8, f.MaxInFlight, "a flag wins over its variable")
	require.Equal(t, 5*time.Second, f.DefaultTimeout)
	require.Equal(t, 10, f.ProjectCeiling)
	require.Equal(t, int64(2048), f.MaxBodyBytes)
	require.Equal(t, time.Minute, f.DrainTimeout)
}

// The event fan-out bounds come from flags or variables and are checked against each
// other.
func TestEventRunFlags(t *testing.T) {
	t.Parallel()
	f, err := parseServerFlags(modeDev, []string{"--max-runs-per-request", "50"}, &bytes.Buffer{},
		envOf(map[string]string{"DURATON_EVENT_RUNS_IN_FLIGHT": "120"}))
	require.NoError(t, err)
	require.Equal(t, 50, f.MaxRunsPerRequest)
	require.Equal(t, 120, f.EventRunsInFlight)
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--max-runs-per-request", "0"}, "--max-runs-per-request (DURATON_MAX_RUNS_PER_REQUEST) must be between 1 and 100000"},
		{[]string{"--max-runs-per-request", "500", "--event-runs-in-flight", "499"}, "--event-runs-in-flight (DURATON_EVENT_RUNS_IN_FLIGHT) must be between --max-runs-per-request (500)"},
	} {
		_, err := parseServerFlags(modeServe, tc.args, &bytes.Buffer{}, envOf(nil))
		require.ErrorContains(t, err, tc.wantErr, "%v", tc.args)
	}
}

// A malformed variable is an error naming it, never the default in silence.
func TestParseServerFlagsMalformedEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, variable, value string
		args                  []string
		wantErr               string
	}{
		{name: "MaxInFlightNotInt", variable: "DURATON_MAX_IN_FLIGHT", value: "lots", wantErr: `DURATON_MAX_IN_FLIGHT: "lots" is not an integer`},
		{name: "MaxBodyBytesNotInt", variable: "DURATON_MAX_BODY_BYTES", value: "1MB", wantErr: `DURATON_MAX_BODY_BYTES: "1MB" is not an integer`},
		{name: "CeilingNotInt", variable: "DURATON_PROJECT_CEILING", value: "1.5", wantErr: `DURATON_PROJECT_CEILING: "1.5" is not an integer`},
		{name: "TimeoutNotDuration", variable: "DURATON_DEFAULT_TIMEOUT", value: "30", wantErr: `DURATON_DEFAULT_TIMEOUT: "30" is not a duration`},
		{name: "DrainNotDuration", variable: "DURATON_DRAIN_TIMEOUT", value: "soon", wantErr: `DURATON_DRAIN_TIMEOUT: "soon" is not a duration`},
		{name: "EvenWhenFlagOverrides", variable: "DURATON_MAX_IN_FLIGHT", value: "x", args: []string{"-max-in-flight", "4"}, wantErr: "DURATON_MAX_IN_FLIGHT"},
		{name: "OutOfRange", variable: "DURATON_MAX_IN_FLIGHT", value: "0", wantErr: "DURATON_MAX_IN_FLIGHT) must be between 1 and 100000, got 0"},
		{name: "CheckpointBytesTooSmall", variable: "DURATON_CHECKPOINT_BYTES", value: "100", wantErr: "DURATON_CHECKPOINT_BYTES) must be between 4096 and 1073741824, got 100"},
		{name: "BodyOverTheCommitBound", variable: "DURATON_MAX_BODY_BYTES", value: "33554432", wantErr: "--max-body-bytes (33554432) must be at most a quarter of the largest commit the data file takes (67108864, 4 times --checkpoint-bytes, at least 64 MiB): raise --checkpoint-bytes"},
		{name: "WorkflowBodyOverTheCommitBound", variable: "DURATON_MAX_WORKFLOW_BODY_BYTES", value: "33554432", wantErr: "--max-workflow-body-bytes (33554432) must be at most a quarter of the largest commit the data file takes (67108864, 4 times --checkpoint-bytes, at least 64 MiB): raise --checkpoint-bytes"},
		{name: "NegativeDrain", variable: "DURATON_DRAIN_TIMEOUT", value: "-1s", wantErr: "DURATON_DRAIN_TIMEOUT) must not be negative"},
		{name: "ShareNotInt", variable: "DURATON_PROJECT_SHARE", value: "half", wantErr: `DURATON_PROJECT_SHARE: "half" is not an integer`},
		{name: "ShareOverCap", variable: "DURATON_PROJECT_SHARE", value: "513", wantErr: "DURATON_PROJECT_SHARE) must be between 0"},
		{name: "LogLevel", variable: "DURATON_LOG_LEVEL", value: "loud", wantErr: "DURATON_LOG_LEVEL"},
		{name: "LogFormat", variable: "DURATON_LOG_FORMAT", value: "xml", wantErr: "DURATON_LOG_FORMAT"},
		{name: "CIDR", variable: "DURATON_ALLOW_CIDRS", value: "10.0.0.0/8, nope", wantErr: "DURATON_ALLOW_CIDRS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseServerFlags(modeServe, tt.args, &bytes.Buffer{}, envOf(map[string]string{tt.variable: tt.value}))
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// A malformed flag value is refused by the flag package, which names the flag.
func TestParseServerFlagsMalformedFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-max-in-flight", "lots"}, {"-default-timeout", "30"}, {"-project-ceiling", "-"}} {
		var stderr bytes.Buffer
		_, err := parseServerFlags(modeDev, args, &stderr, envOf(nil))
		require.ErrorIs(t, err, errUsage, "%v", args)
		require.Contains(t, stderr.String(), "invalid value")
		require.Contains(t, stderr.String(), args[0], "names the flag")
	}
}

// The binary refuses to start on a malformed variable: exit status 1 and the variable named,
// before anything is opened.
func TestRunRefusesMalformedEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Bounds a regression (a server that starts anyway) instead of hanging the suite.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"dev", "-data", dir, "-addr", "127.0.0.1:0"}, &stdout, &stderr,
		envOf(map[string]string{"DURATON_DEFAULT_TIMEOUT": "thirty seconds"}))
	require.Equal(t, 1, code, "stdout %s stderr %s", stdout.String(), stderr.String())
	require.Contains(t, stderr.String(), `DURATON_DEFAULT_TIMEOUT: "thirty seconds" is not a duration`)
	require.NoFileExists(t, dir+"/duraton.db", "nothing opened")
}

func TestRetentionFlags(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		f, err := parseServerFlags(modeServe, nil, io.Discard, envOf(nil))
		require.NoError(t, err)
		require.Equal(t, retention{Logs: 7 * 24 * time.Hour, Runs: 7 * 24 * time.Hour, DLQ: 14 * 24 * time.Hour, Dedup: 10 * time.Minute, SweepInterval: time.Minute}, f.Retention)
		var c delivery.Config
		f.Retention.apply(&c)
		require.Equal(t, 7*24*time.Hour, c.LogRetention)
		require.Equal(t, 7*24*time.Hour, c.RunRetention)
		require.Equal(t, 14*24*time.Hour, c.DLQRetention)
		require.Equal(t, 10*time.Minute, c.DedupWindow)
		require.Equal(t, time.Minute, c.SweepInterval)
	})

	t.Run("EnvAndFlags", func(t *testing.T) {
		t.Parallel()
		env := envOf(map[string]string{
			"DURATON_LOG_RETENTION": "48h", "DURATON_RUN_RETENTION": "72h", "DURATON_DLQ_RETENTION": "720h",
			"DURATON_DEDUP_WINDOW": "1h", "DURATON_SWEEP_INTERVAL": "30s",
		})
		f, err := parseServerFlags(modeDev, []string{"--log-retention", "24h"}, io.Discard, env)
		require.NoError(t, err)
		require.Equal(t, retention{Logs: 24 * time.Hour, Runs: 72 * time.Hour, DLQ: 720 * time.Hour, Dedup: time.Hour, SweepInterval: 30 * time.Second}, f.Retention, "a flag wins over its variable")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		for args, want := range map[string]string{
			"--log-retention=30s":   "--log-retention must be between 1m0s and",
			"--run-retention=0s":    "--run-retention must be between",
			"--dlq-retention=-1h":   "--dlq-retention must be between",
			"--dedup-window=90000h": "--dedup-window must be between",
			"--sweep-interval=2h":   "--sweep-interval must be between 1s and 1h",
		} {
			_, err := parseServerFlags(modeServe, []string{args}, io.Discard, envOf(nil))
			require.ErrorContains(t, err, want, args)
		}
	})
}

// TestAIPricesFlag: --ai-prices (DURATON_AI_PRICES) reads and validates the price file;
// a missing or bad file stops the start with an error naming the flag and the problem.
func TestAIPricesFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "prices.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"models": {"gpt-4o-mini": {"input": 0.15, "output": 0.60}}}`), 0o600))
	f, err := parseServerFlags(modeServe, nil, io.Discard, envOf(map[string]string{"DURATON_AI_PRICES": good}))
	require.NoError(t, err)
	require.Equal(t, 0.6, f.AIPrices.Models["gpt-4o-mini"].Output)
	f, err = parseServerFlags(modeServe, nil, io.Discard, envOf(nil))
	require.NoError(t, err)
	require.Nil(t, f.AIPrices, "no file, no prices")

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"models": {"m": {"input": -1, "output": 0}}}`), 0o600))
	_, err = parseServerFlags(modeServe, []string{"--ai-prices", bad}, io.Discard, envOf(nil))
	require.ErrorContains(t, err, "--ai-prices (DURATON_AI_PRICES) "+bad+": ai prices: models.m.input must be a finite USD amount")
	_, err = parseServerFlags(modeServe, []string{"--ai-prices", filepath.Join(dir, "missing.json")}, io.Discard, envOf(nil))
	require.ErrorContains(t, err, "no such file")
}

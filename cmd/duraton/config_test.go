package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraton/duraton/delivery"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

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

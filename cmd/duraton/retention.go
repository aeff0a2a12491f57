package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/duraton/duraton/delivery"
)

// retention is how long the engine keeps what has ended. The defaults are the engine's
// (delivery.Config): logs and ended runs 7 days, dead letters 14 days, deduplication ids
// 10 minutes, a sweep every minute.
type retention struct {
	Logs, Runs, DLQ, Dedup, SweepInterval time.Duration
}

// Bounds of the retention settings: below a minute a record could vanish before anyone
// reads it; beyond ten years it is not retention.
const (
	minRetention = time.Minute
	maxRetention = 10 * 365 * 24 * time.Hour
)

func (r *retention) flags(fs *flag.FlagSet, e *envDefaults) {
	fs.DurationVar(&r.Logs, "log-retention", e.duration("DURATON_LOG_RETENTION", 7*24*time.Hour), "how long message and run logs are kept (DURATON_LOG_RETENTION)")
	fs.DurationVar(&r.Runs, "run-retention", e.duration("DURATON_RUN_RETENTION", 7*24*time.Hour), "how long an ended workflow run and its history are kept (DURATON_RUN_RETENTION)")
	fs.DurationVar(&r.DLQ, "dlq-retention", e.duration("DURATON_DLQ_RETENTION", 14*24*time.Hour), "how long dead letters are kept (DURATON_DLQ_RETENTION)")
	fs.DurationVar(&r.Dedup, "dedup-window", e.duration("DURATON_DEDUP_WINDOW", 10*time.Minute), "how long a deduplication id is remembered (DURATON_DEDUP_WINDOW)")
	fs.DurationVar(&r.SweepInterval, "sweep-interval", e.duration("DURATON_SWEEP_INTERVAL", time.Minute), "how often expired records are removed (DURATON_SWEEP_INTERVAL)")
}

func (r retention) validate() error {
	for _, s := range []struct {
		flag string
		v    time.Duration
	}{{"--log-retention", r.Logs}, {"--run-retention", r.Runs}, {"--dlq-retention", r.DLQ}, {"--dedup-window", r.Dedup}} {
		if s.v < minRetention || s.v > maxRetention {
			return fmt.Errorf("%s must be between %s and %s, got %s", s.flag, minRetention, maxRetention, s.v)
		}
	}
	if r.SweepInterval < time.Second || r.SweepInterval > time.Hour {
		return fmt.Errorf("--sweep-interval must be between 1s and 1h, got %s", r.SweepInterval)
	}
	return nil
}

// apply sets the engine's retention fields.
func (r retention) apply(c *delivery.Config) {
	c.LogRetention, c.RunRetention, c.DLQRetention, c.DedupWindow, c.SweepInterval = r.Logs, r.Runs, r.DLQ, r.Dedup, r.SweepInterval
}

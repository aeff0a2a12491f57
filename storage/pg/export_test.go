package pg

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// OpenTraced opens an engine whose connections report every statement to tr.
func OpenTraced(ctx context.Context, cfg Config, tr pgx.QueryTracer) (*Engine, error) {
	cfg.tracer = tr
	return Open(ctx, cfg)
}

// SetClock replaces the engine's monotonic clock (nanoseconds); call it before TryLead.
func (e *Engine) SetClock(clock func() int64) { e.clock = clock }

// MaxCachedValue is the largest value the cache keeps.
const MaxCachedValue = maxCachedValue

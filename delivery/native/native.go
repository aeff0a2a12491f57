package native

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl/expr"
	"github.com/duraton/duraton/storage"
)

// Errors of the native operations; the server maps them to HTTP.
var (
	// ErrInvalid is a bad definition or event (400); the text names the workflow or
	// event and the field.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound is an unknown app, workflow or event (404).
	ErrNotFound = fmt.Errorf("native: %w", storage.ErrNotFound)
	// ErrConflict is a workflow name owned by another app (409).
	ErrConflict = errors.New("workflow name conflict")
	// ErrLimit is a count over its limit (412).
	ErrLimit = errors.New("limit reached")
)

// Store is what the unit reads outside the engine's transactions.
type Store interface {
	View(fn func(*storage.Tx) error) error
}

var _ Store = (*storage.Store)(nil)

// Config configures the unit. Zero fields take the documented defaults.
type Config struct {
	// MaxApps caps a project's apps. Default 1,000.
	MaxApps int
	// MaxWorkflowsPerApp caps one app's workflows. Default 1,000.
	MaxWorkflowsPerApp int
	// MaxEventsPerRequest caps the events of one POST /events. Default 1,000.
	MaxEventsPerRequest int
	// MaxRunsPerRequest caps the workflow runs one POST /events may start: each event
	// counts one per workflow it triggers, and a request over it is refused whole
	// (ErrTooManyRuns). Default 1,000, as /v2/batch's messages.
	MaxRunsPerRequest int
	// MaxRunsInFlight caps the runs one project's event requests may be creating at once
	// (their transactions hold them in memory until they commit); a request that would go
	// over it is refused whole (ErrBusy). At least MaxRunsPerRequest. Default 2,000.
	MaxRunsInFlight int
	// EventDedupWindow is how long an event dedupeId is remembered. Default 24 h.
	EventDedupWindow time.Duration
	// CheckURL validates a workflow URL like a publish destination (required).
	CheckURL func(raw string) (*url.URL, error)
	// Now is the flusher's clock; give it the engine's. Default time.Now.
	Now func() time.Time
	// FlushIdle is how long the flusher sleeps when no debounce or batch deadline is
	// pending (a new buffer wakes it earlier). Default 1 min.
	FlushIdle time.Duration
	// Logger receives the flusher's errors. Default: discarded.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxApps <= 0 {
		c.MaxApps = 1000
	}
	if c.MaxWorkflowsPerApp <= 0 {
		c.MaxWorkflowsPerApp = 1000
	}
	if c.MaxEventsPerRequest <= 0 {
		c.MaxEventsPerRequest = 1000
	}
	if c.MaxRunsPerRequest <= 0 {
		c.MaxRunsPerRequest = 1000
	}
	if c.MaxRunsInFlight <= 0 {
		c.MaxRunsInFlight = 2 * c.MaxRunsPerRequest
	}
	if c.EventDedupWindow <= 0 {
		c.EventDedupWindow = 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.FlushIdle <= 0 {
		c.FlushIdle = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Service is the native-workflow unit of every project.
type Service struct {
	cfg    Config
	store  Store
	engine *delivery.Engine
	ids    storage.IDGen
	kick   chan struct{} // wakes the flusher (capacity 1)
	runs   *runBudget    // runs each project's event requests are creating
	exprs  *expr.Cache   // the compiled expressions of definitions (keys.go)

	mu   sync.Mutex
	stop context.CancelFunc // of the running flusher; nil when stopped
	done chan struct{}
}

// New builds the unit over the engine and its store. Its transactions take their time
// from the engine's clock.
func New(cfg Config, store Store, engine *delivery.Engine) (*Service, error) {
	cfg = cfg.withDefaults()
	if cfg.CheckURL == nil {
		return nil, errors.New("native: Config.CheckURL is required")
	}
	if engine == nil || store == nil {
		return nil, errors.New("native: an engine and a store are required")
	}
	if cfg.MaxRunsInFlight < cfg.MaxRunsPerRequest {
		return nil, fmt.Errorf("native: Config.MaxRunsInFlight (%d) must be at least MaxRunsPerRequest (%d)", cfg.MaxRunsInFlight, cfg.MaxRunsPerRequest)
	}
	return &Service{cfg: cfg, store: store, engine: engine, kick: make(chan struct{}, 1), runs: newRunBudget(cfg.MaxRunsInFlight), exprs: expr.NewCache(0)}, nil
}

// MaxEventsPerRequest is the configured cap of one POST /events.
func (s *Service) MaxEventsPerRequest() int { return s.cfg.MaxEventsPerRequest }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

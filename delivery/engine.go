package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/duraton/duraton/delivery/internal/sched"
	"github.com/duraton/duraton/delivery/netguard"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/flowctl/expr"
	"github.com/duraton/duraton/storage"
)

// Config configures an Engine. Zero fields take the documented defaults.
type Config struct {
	// MaxInFlight caps concurrent delivery attempts across all projects. Default 512.
	MaxInFlight int
	// BufferSize caps the due entries held in memory; the rest stay in storage and are
	// paged in as the buffer drains. Default 100,000.
	BufferSize int
	// ProjectCeiling caps the deliveries of one project in flight at once, across all its
	// keys (0: no ceiling). Default 0.
	ProjectCeiling int
	// ProjectShare caps one project's part of MaxInFlight, so a project whose endpoints
	// hang cannot starve the others; projects at their share take turns for freed slots.
	// Default MaxInFlight/2 (at least 1); MaxInFlight or more turns it off.
	ProjectShare int
	// MaxCarriedBytes caps the memory of messages held with their due entries, so that a
	// fresh message is sent without being read back from storage. Default 64 MiB.
	MaxCarriedBytes int64
	// DefaultTimeout bounds one attempt when the message sets no Upstash-Timeout. Default 30s.
	DefaultTimeout time.Duration
	// MaxResponseBytes caps what is read (and kept for callbacks and the DLQ) of an
	// endpoint's answer. Default 256 KiB.
	MaxResponseBytes int64
	// DrainTimeout is how long Stop waits for in-flight attempts. Default 10s.
	DrainTimeout time.Duration
	// DedupWindow is how long a deduplication id is remembered. Default 10m.
	DedupWindow time.Duration
	// LogRetention and DLQRetention bound how long logs and dead letters are kept.
	// Defaults 7 days and 14 days.
	LogRetention time.Duration
	DLQRetention time.Duration
	// RunRetention is how long an ended workflow run (with its history) is kept. Default
	// 7 days.
	RunRetention time.Duration
	// SweepInterval is the period of the retention sweeper. Default 1m.
	SweepInterval time.Duration
	// MaxQueues caps the queues of one project. Default 1,000.
	MaxQueues int
	// MaxFlowKeys caps the flow-control keys one project may have active at once
	// (deliveries waiting or in flight, a rate window that still counts, an operator's
	// pause or pin). A publication that would add a key beyond it is refused
	// (ErrFlowKeyLimit); steps of a run already started are not. Default 100,000.
	MaxFlowKeys int
	// MaxRunSteps caps a workflow run's history entries. Default 5,000.
	MaxRunSteps int
	// MaxRunHistoryBytes caps the summed body size of a run's history. Default 32 MiB.
	MaxRunHistoryBytes int64
	// MaxParallelSteps caps the messages of one run in one publish request, i.e. the
	// size of a parallel group. Default 256.
	MaxParallelSteps int
	// MaxInvokeDepth caps nested context.invoke calls. Default 100.
	MaxInvokeDepth int
	// MaxWaitTimeout caps a waitForEvent timeout. Default 365 days.
	MaxWaitTimeout time.Duration
	// MaxNotifyWaiters caps the waiters one notify wakes (in one transaction); the
	// answer says when more were left waiting. Default 1,000.
	MaxNotifyWaiters int
	// MaxRunEvents and MaxRunEventBytes cap the events kept for one run that does not
	// wait for them yet (notify with a run id, webhook calls before the wait): their
	// count and summed size (event ids and data). Beyond either a notify answers 412.
	// Defaults 100 and 1 MiB.
	MaxRunEvents     int
	MaxRunEventBytes int64
	// EventRetention is how long a kept event waits for its run to wait for it; kept
	// events also go when their run succeeds, is cancelled or is deleted. Default 7 days.
	EventRetention time.Duration
	// MaxPageBytes is the byte budget of one page of a listing (logs, dead letters, runs
	// with their histories, waiters): a page ends early, with a cursor, once the records
	// it holds reach it (it always holds one). Default 4 MiB.
	MaxPageBytes int
	// Destinations decides which addresses attempts may connect to (checked at dial time).
	// The zero value allows public addresses only.
	Destinations netguard.Policy
	// AIPrices is the AI price table (USD per million tokens per model) that prices AI
	// steps whose provider reports no cost. Default: none (tokens metered, cost 0, and a
	// run with a maxCost cap cannot start an AI step).
	AIPrices *flowctl.AIPrices
	// Transport, if set, replaces the SSRF-guarded transport (tests and benchmarks).
	Transport http.RoundTripper
	// Hooks observe the engine (benchmarks and tests); nil fields cost nothing.
	Hooks Hooks
	// Observer is told what the engine does, for metrics. Default: nothing.
	Observer Observer
	// Tracer is told of each attempt of a run's delivery, and deliveries of runs carry a
	// traceparent header (trace.go). Default: nil, no tracing.
	Tracer Tracer
	// Runs is told which runs each commit changed, for live streams (watch.go).
	// Default: nobody.
	Runs RunWatcher
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the engine's logs. Default slog.Default().
	Logger *slog.Logger
}

// Hooks are callbacks for measurement. They run on the engine's goroutines and must be
// fast and safe for concurrent use.
type Hooks struct {
	// Woken is called just before a delivery is sent that a slot's release started
	// (the waitlist's head admitted on release), with the time since that release.
	Woken func(project, flowKey string, sinceRelease time.Duration)
	// Recorded is called after a message's attempt outcome or cancellation is durable,
	// with the message's state then (RETRY→ERROR, DELIVERED, FAILED, CANCELLED): tests
	// wait on it instead of polling storage.
	Recorded func(project, messageID, state string)
}

// Validate reports the first field that is out of range, naming it. Zero means "the
// default" for every numeric field; negative values are errors.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"MaxInFlight", c.MaxInFlight < 0},
		{"BufferSize", c.BufferSize < 0},
		{"ProjectCeiling", c.ProjectCeiling < 0},
		{"ProjectShare", c.ProjectShare < 0},
		{"MaxCarriedBytes", c.MaxCarriedBytes < 0},
		{"DefaultTimeout", c.DefaultTimeout < 0},
		{"MaxResponseBytes", c.MaxResponseBytes < 0},
		{"DrainTimeout", c.DrainTimeout < 0},
		{"DedupWindow", c.DedupWindow < 0},
		{"LogRetention", c.LogRetention < 0},
		{"DLQRetention", c.DLQRetention < 0},
		{"RunRetention", c.RunRetention < 0},
		{"SweepInterval", c.SweepInterval < 0},
		{"MaxQueues", c.MaxQueues < 0},
		{"MaxFlowKeys", c.MaxFlowKeys < 0},
		{"MaxRunSteps", c.MaxRunSteps < 0},
		{"MaxRunHistoryBytes", c.MaxRunHistoryBytes < 0},
		{"MaxParallelSteps", c.MaxParallelSteps < 0},
		{"MaxInvokeDepth", c.MaxInvokeDepth < 0},
		{"MaxWaitTimeout", c.MaxWaitTimeout < 0},
		{"MaxNotifyWaiters", c.MaxNotifyWaiters < 0},
	} {
		if f.bad {
			return fmt.Errorf("delivery: config: %s must not be negative", f.name)
		}
	}
	if c.ProjectCeiling > 0 && c.MaxInFlight > 0 && c.ProjectCeiling > c.MaxInFlight {
		return fmt.Errorf("delivery: config: ProjectCeiling %d exceeds MaxInFlight %d", c.ProjectCeiling, c.MaxInFlight)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 512
	}
	if c.MaxNotifyWaiters <= 0 {
		c.MaxNotifyWaiters = 1000
	}
	if c.BufferSize <= 0 {
		c.BufferSize = 100_000
	}
	if c.MaxCarriedBytes <= 0 {
		c.MaxCarriedBytes = 64 << 20
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = 30 * time.Second
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = 256 << 10
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.DedupWindow <= 0 {
		c.DedupWindow = 10 * time.Minute
	}
	if c.LogRetention <= 0 {
		c.LogRetention = 7 * 24 * time.Hour
	}
	if c.DLQRetention <= 0 {
		c.DLQRetention = 14 * 24 * time.Hour
	}
	if c.RunRetention <= 0 {
		c.RunRetention = 7 * 24 * time.Hour
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = time.Minute
	}
	if c.MaxQueues <= 0 {
		c.MaxQueues = 1000
	}
	if c.MaxFlowKeys <= 0 {
		c.MaxFlowKeys = 100_000
	}
	if c.MaxRunSteps <= 0 {
		c.MaxRunSteps = 5000
	}
	if c.MaxRunHistoryBytes <= 0 {
		c.MaxRunHistoryBytes = 32 << 20
	}
	if c.MaxParallelSteps <= 0 {
		c.MaxParallelSteps = 256
	}
	if c.MaxInvokeDepth <= 0 {
		c.MaxInvokeDepth = 100
	}
	if c.MaxRunEvents <= 0 {
		c.MaxRunEvents = 100
	}
	if c.MaxRunEventBytes <= 0 {
		c.MaxRunEventBytes = 1 << 20
	}
	if c.EventRetention <= 0 {
		c.EventRetention = 7 * 24 * time.Hour
	}
	if c.MaxPageBytes <= 0 {
		c.MaxPageBytes = 4 << 20
	}
	if c.MaxWaitTimeout <= 0 {
		c.MaxWaitTimeout = 365 * 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Engine accepts, schedules and delivers messages.
type Engine struct {
	cfg     Config
	store   Store
	log     *slog.Logger
	client  *http.Client
	ids     *storage.IDGen
	keys    keyCache
	disp    *dispatcher
	wf      *runs        // the workflow-run unit
	hooks   runHooks     // the same unit, as the message engine sees it
	inline  *inlineOffer // nil: no inline answers offered (inline.go); set before Start
	flights flights      // workflow deliveries in flight, for early outcomes (early.go)
	flowMu  sync.Mutex   // orders operator changes to flow-control keys with their storage
	queueMu sync.Mutex   // orders queue creations and changes with the scheduler's settings
	runCtx  context.Context

	mu        sync.Mutex
	started   bool
	stopping  bool
	cancel    context.CancelCauseFunc // cancels in-flight attempts
	loops     sync.WaitGroup          // dispatcher and sweeper
	attempts  sync.WaitGroup          // in-flight attempts
	workers   *workers                // the goroutines attempts run on (workers.go)
	exprs     *expr.Cache             // wait conditions, compiled once (waitcond.go)
	runEvents eventCache              // waiting runs' events, decoded (waitcond.go)
}

// New builds an engine over store. It starts nothing; call Start.
func New(cfg Config, store Store) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	transport := cfg.Transport
	if transport == nil {
		var err error
		if transport, err = newTransport(cfg.Destinations); err != nil {
			return nil, err
		}
	}
	store = watch(store, cfg.Runs)
	e := &Engine{
		exprs: expr.NewCache(0),
		cfg:   cfg,
		store: store,
		log:   cfg.Logger.With("component", "delivery"),
		client: &http.Client{
			Transport: transport,
			// Redirects are not followed: a 3xx is a failed attempt (docs/guarantees.md,
			// "Delivery semantics").
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	e.keys.store = store
	e.ids = &storage.IDGen{}
	e.wf = &runs{ids: e.ids, limits: runLimits{MaxRunSteps: cfg.MaxRunSteps, MaxRunHistoryBytes: cfg.MaxRunHistoryBytes,
		MaxParallelSteps: cfg.MaxParallelSteps, MaxInvokeDepth: cfg.MaxInvokeDepth, MaxWaitTimeout: cfg.MaxWaitTimeout}}
	e.hooks = e.wf
	s, err := sched.New(sched.Config{MaxInFlight: cfg.MaxInFlight, BufferSize: cfg.BufferSize,
		ProjectCeiling: cfg.ProjectCeiling, ProjectShare: cfg.ProjectShare, MaxCarriedBytes: cfg.MaxCarriedBytes})
	if err != nil {
		return nil, err
	}
	// Attempts run under runCtx; Stop cancels it after the drain.
	e.runCtx, e.cancel = context.WithCancelCause(context.Background())
	e.disp = newDispatcher(s, e.pageDue, e.launch, e.now, e.log)
	e.workers = newWorkers(func(st sched.Start) (sched.Start, bool) { return e.attempt(e.runCtx, st) }, idleWorkerWait)
	return e, nil
}

// pageDue reads a page of the due index for the scheduler.
func (e *Engine) pageDue(req sched.PageRequest) ([]storage.DueEntry, error) {
	var out []storage.DueEntry
	err := e.store.View(func(tx *storage.Tx) error {
		out = out[:0]
		return tx.ScanDue(req.After, func(d storage.DueEntry) bool {
			if len(out) == req.Limit {
				return false
			}
			out = append(out, d)
			return true
		})
	})
	return out, err
}

// launch runs one started delivery on an attempt worker (workers.go).
func (e *Engine) launch(st sched.Start) {
	e.attempts.Add(1)
	e.workers.start(st)
}

// Start loads the due index and starts the dispatcher and the retention sweeper. It
// returns without blocking.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return errors.New("delivery: engine already started")
	}
	runCtx := e.runCtx
	if err := e.loadSchedulerState(ctx); err != nil {
		return fmt.Errorf("delivery: load scheduler state: %w", err)
	}
	e.started = true
	e.loops.Add(2)
	go func() { defer e.loops.Done(); e.disp.run(runCtx) }()
	go func() { defer e.loops.Done(); e.sweepLoop(runCtx) }()
	return nil
}

// Stop stops dispatching, waits up to DrainTimeout for in-flight attempts, cancels the
// rest and returns when every goroutine of the engine has ended. It is idempotent.
func (e *Engine) Stop() {
	e.mu.Lock()
	if !e.started || e.stopping {
		e.mu.Unlock()
		return
	}
	e.stopping = true
	e.mu.Unlock()

	e.disp.stop()
	drained := make(chan struct{})
	go func() { e.attempts.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(e.cfg.DrainTimeout):
		e.log.Warn("drain timeout, cancelling in-flight attempts", "timeout", e.cfg.DrainTimeout)
	}
	e.cancel(errors.New("engine stopped"))
	e.attempts.Wait()
	e.workers.stop()
	e.loops.Wait()
	if ci, ok := e.client.Transport.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func (e *Engine) now() time.Time { return e.cfg.Now() }

package schedule

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// Errors of the management methods.
var (
	ErrNotFound = fmt.Errorf("schedule %w", storage.ErrNotFound)
	ErrLimit    = errors.New("schedule limit reached")
	ErrBadID    = errors.New("invalid schedule id")
	// errStale aborts a tick whose schedule changed since it was read.
	errStale = errors.New("schedule changed")
)

// IDPrefix starts generated schedule ids.
const IDPrefix = "scd_"

// MaxIDLen caps a schedule id given with Upstash-Schedule-Id.
const MaxIDLen = 128

var idPattern = regexp.MustCompile(`^[a-zA-Z0-9\-_.]+$`)

// Store is what the scheduler needs of storage.
type Store interface {
	Update(fn func(*storage.Tx) error) error
	View(fn func(*storage.Tx) error) error
}

// Publisher is what the scheduler needs of the engine.
type Publisher interface {
	PublishAllWith(ctx context.Context, pubs []delivery.Publication, also func(*storage.Tx) error) ([]delivery.PublishResult, error)
}

var (
	_ Store     = (*storage.Store)(nil)
	_ Publisher = (*delivery.Engine)(nil)
)

// Config configures a Scheduler. Zero fields take the documented defaults.
type Config struct {
	// MaxPerProject caps the schedules of one project. Default 1,000.
	MaxPerProject int
	// RetryAfter is how long a tick whose publication failed (storage error, queue
	// limit) waits before it is tried again. Default 5s.
	RetryAfter time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the scheduler's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxPerProject <= 0 {
		c.MaxPerProject = 1000
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

type key struct{ project, id string }

// Scheduler fires the ticks of every project's schedules.
type Scheduler struct {
	cfg   Config
	store Store
	pub   Publisher
	log   *slog.Logger

	mu       sync.Mutex
	next     map[key]int64 // active schedules' next tick, unix ms (a failed tick: its retry)
	started  bool
	stopping bool
	cancel   context.CancelFunc
	done     chan struct{}
	wake     chan struct{}
}

// New builds a scheduler. It starts nothing; call Start.
func New(cfg Config, store Store, pub Publisher) *Scheduler {
	cfg = cfg.withDefaults()
	return &Scheduler{cfg: cfg, store: store, pub: pub, log: cfg.Logger.With("component", "schedule"),
		next: map[key]int64{}, done: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// Start loads the active schedules of every project and starts the loop. It returns
// without blocking.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("schedule: already started")
	}
	err := s.store.View(func(tx *storage.Tx) error {
		projects, err := tx.Projects()
		if err != nil {
			return err
		}
		for _, p := range projects {
			list, err := tx.Schedules(p.ID)
			if err != nil {
				return err
			}
			for _, sc := range list {
				if !sc.Paused && sc.NextAt > 0 {
					s.next[key{sc.Project, sc.ID}] = sc.NextAt
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("schedule: load schedules: %w", err)
	}
	s.started = true
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go s.run(runCtx)
	return nil
}

// Stop ends the loop and waits for a tick in progress. It is idempotent.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	if !s.started || s.stopping {
		s.mu.Unlock()
		return
	}
	s.stopping = true
	s.mu.Unlock()
	s.cancel()
	<-s.done
}

func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// maxSleep bounds one sleep, so a wall-clock jump is noticed within it.
const maxSleep = time.Hour

func (s *Scheduler) run(ctx context.Context) {
	defer close(s.done)
	timer := time.NewTimer(maxSleep)
	defer timer.Stop()
	for {
		timer.Reset(s.fireDue(ctx))
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// fireDue fires every tick that is due and says how long to sleep until the next one.
func (s *Scheduler) fireDue(ctx context.Context) time.Duration {
	now := s.cfg.Now()
	s.mu.Lock()
	var due []key
	for k, at := range s.next {
		if at <= now.UnixMilli() {
			due = append(due, k)
		}
	}
	expected := make([]int64, len(due))
	for i, k := range due {
		expected[i] = s.next[k]
	}
	s.mu.Unlock()
	for i, k := range due {
		if ctx.Err() != nil {
			return 0
		}
		s.fire(ctx, k, expected[i], now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	wait := maxSleep
	for _, at := range s.next {
		wait = min(wait, time.Duration(at-now.UnixMilli())*time.Millisecond)
	}
	return max(wait, 0)
}

// fire publishes one tick of k and moves its next tick, in one transaction.
func (s *Scheduler) fire(ctx context.Context, k key, memAt int64, now time.Time) {
	var sc *storage.Schedule
	err := s.store.View(func(tx *storage.Tx) error {
		var err error
		sc, err = tx.Schedule(k.project, k.id)
		return err
	})
	if err != nil || sc.Paused || sc.NextAt == 0 || sc.NextAt > now.UnixMilli() {
		s.reload(k, err)
		return
	}
	expected := sc.NextAt
	c, err := ParseCron(sc.Cron)
	if err != nil { // validated at creation: only a damaged record gets here
		s.log.Error("schedule has an invalid cron expression", "project", k.project, "schedule_id", k.id, "err", err)
		s.setNext(k, 0)
		return
	}
	next := nextTick(c, now, time.UnixMilli(expected)).UnixMilli()
	m := tickMessage(sc, now)
	_, err = s.pub.PublishAllWith(ctx, []delivery.Publication{{Message: m}}, func(tx *storage.Tx) error {
		cur, err := tx.Schedule(k.project, k.id)
		if errors.Is(err, storage.ErrNotFound) {
			return errStale
		}
		if err != nil {
			return err
		}
		if cur.Paused || cur.NextAt != expected {
			return errStale
		}
		cur.NextAt, cur.LastAt, cur.LastMessageID = next, now.UnixMilli(), m.ID
		return tx.PutSchedule(cur)
	})
	switch {
	case errors.Is(err, errStale):
		s.reload(k, nil)
	case ctx.Err() != nil:
		return // stopping: the tick's durable NextAt is unchanged and fires after restart
	case err != nil:
		s.log.Error("schedule tick not published, will retry", "project", k.project, "schedule_id", k.id, "retry_after", s.cfg.RetryAfter, "err", err)
		s.setNext(k, max(memAt, now.Add(s.cfg.RetryAfter).UnixMilli()))
	default:
		s.setNext(k, next)
	}
}

// tickMessage is the message one tick publishes: the template, marked with the
// schedule's id (field and Upstash-Schedule-Id header), delayed by the schedule's delay.
func tickMessage(sc *storage.Schedule, now time.Time) *delivery.Message {
	m := sc.Template
	m.Header = maps.Clone(m.Header)
	if m.Header == nil {
		m.Header = map[string][]string{}
	}
	m.Header[wire.HeaderScheduleID] = []string{sc.ID}
	m.Labels = slices.Clone(m.Labels)
	m.Project, m.ScheduleID = sc.Project, sc.ID
	if sc.DelayMs > 0 {
		m.NotBefore = now.UnixMilli() + sc.DelayMs
	}
	return &m
}

// reload makes the in-memory next tick of k follow its stored record.
func (s *Scheduler) reload(k key, readErr error) {
	if readErr != nil && !errors.Is(readErr, storage.ErrNotFound) {
		s.log.Error("read schedule", "project", k.project, "schedule_id", k.id, "err", readErr)
		s.setNext(k, s.cfg.Now().Add(s.cfg.RetryAfter).UnixMilli())
		return
	}
	var at int64
	_ = s.store.View(func(tx *storage.Tx) error {
		if sc, err := tx.Schedule(k.project, k.id); err == nil && !sc.Paused {
			at = sc.NextAt
		}
		return nil
	})
	s.setNext(k, at)
}

// setNext records k's next tick in memory (0: none) and wakes the loop.
func (s *Scheduler) setNext(k key, at int64) {
	s.mu.Lock()
	if at > 0 {
		s.next[k] = at
	} else {
		delete(s.next, k)
	}
	s.mu.Unlock()
	s.signal()
}

func newID() string {
	return IDPrefix + rand.Text()
}

package live

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraton/duraton/delivery"
)

// Config bounds the hub. Zero fields take the documented defaults.
type Config struct {
	// MaxStreams caps the streams open at once (run and project streams together);
	// one more is refused with 503. Default 256.
	MaxStreams int
	// Buffer caps the changes queued for one project stream while it writes; a stream
	// that falls further behind is ended (its client reconnects and resumes). Default 1,024.
	Buffer int
	// Ring is how many recent changes the hub remembers for resuming project streams.
	// Default 4,096.
	Ring int
	// Heartbeat is how often an idle stream sends a comment line (keeping proxies from
	// closing it) and a run stream re-reads its run. Default 15s.
	Heartbeat time.Duration
	// WriteTimeout bounds one write to a client; a client that does not read is
	// dropped. Default 10s.
	WriteTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxStreams <= 0 {
		c.MaxStreams = 256
	}
	if c.Buffer <= 0 {
		c.Buffer = 1024
	}
	if c.Ring <= 0 {
		c.Ring = 4096
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 15 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	return c
}

// ErrTooManyStreams is returned when MaxStreams streams are open.
var ErrTooManyStreams = errors.New("too many live streams open; retry later")

// change is one run changed by a commit, numbered in the order the hub heard of it.
type change struct {
	seq uint64
	ref delivery.RunRef
}

// sub is one open stream's mailbox.
type sub struct {
	wake    chan struct{} // buffered (1): something changed
	mu      sync.Mutex
	pending []change // project streams: changes not yet written
	dropped bool     // project streams: pending overflowed
}

func (s *sub) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the changes queued for s, and whether it fell behind.
func (s *sub) take() ([]change, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending
	s.pending = nil
	return p, s.dropped
}

// Hub routes the engine's change notifications to open streams.
type Hub struct {
	cfg   Config
	epoch string // tells this process's project stream ids from another's
	open  atomic.Int64
	done  chan struct{}
	once  sync.Once

	mu       sync.Mutex
	runs     map[delivery.RunRef]map[*sub]struct{}
	projects map[string]map[*sub]struct{}
	seq      uint64   // the last change's number
	floor    uint64   // resuming needs an id at or after this (changes before may be unknown)
	ring     []change // the last cfg.Ring changes, oldest at ring[head]
	head     int
}

var _ delivery.RunWatcher = (*Hub)(nil)

// New builds a hub.
func New(cfg Config) *Hub {
	cfg = cfg.withDefaults()
	return &Hub{cfg: cfg, epoch: strconv.FormatInt(time.Now().UnixNano(), 36), done: make(chan struct{}),
		runs: map[delivery.RunRef]map[*sub]struct{}{}, projects: map[string]map[*sub]struct{}{}}
}

// Close ends every stream (before the HTTP server's shutdown waits for requests).
func (h *Hub) Close() { h.once.Do(func() { close(h.done) }) }

// Watching reports whether any stream is open: the engine records changed runs only then.
func (h *Hub) Watching() bool { return h.open.Load() > 0 }

// RunsChanged wakes the streams of refs. It never blocks on a stream.
func (h *Hub) RunsChanged(refs []delivery.RunRef) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ref := range refs {
		h.seq++
		c := change{seq: h.seq, ref: ref}
		if len(h.ring) < h.cfg.Ring {
			h.ring = append(h.ring, c)
		} else {
			h.ring[h.head] = c
			h.head = (h.head + 1) % len(h.ring)
		}
		for s := range h.runs[ref] {
			s.notify()
		}
		for s := range h.projects[ref.Project] {
			s.mu.Lock()
			if len(s.pending) < h.cfg.Buffer {
				s.pending = append(s.pending, c)
			} else {
				s.dropped = true
			}
			s.mu.Unlock()
			s.notify()
		}
	}
}

// admit counts a new stream in, within MaxStreams. Call under h.mu.
func (h *Hub) admit() error {
	if h.open.Load() >= int64(h.cfg.MaxStreams) {
		return ErrTooManyStreams
	}
	if h.open.Add(1) == 1 {
		// Nobody watched until now: commits since the last stream closed went unheard,
		// so ids from before cannot resume.
		h.seq++
		h.floor = h.seq
	}
	return nil
}

// subscribeRun opens a stream of one run.
func (h *Hub) subscribeRun(ref delivery.RunRef) (*sub, func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.admit(); err != nil {
		return nil, nil, err
	}
	s := &sub{wake: make(chan struct{}, 1)}
	return s, addSub(h, h.runs, ref, s), nil
}

// addSub adds s to subs under key and returns what removes it (and the key once empty)
// and gives its slot back. Call under h.mu.
func addSub[K comparable](h *Hub, subs map[K]map[*sub]struct{}, key K, s *sub) func() {
	m := subs[key]
	if m == nil {
		m = map[*sub]struct{}{}
		subs[key] = m
	}
	m[s] = struct{}{}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(m, s)
		if len(m) == 0 {
			delete(subs, key)
		}
		h.open.Add(-1)
	}
}

// subscribeProject opens a stream of a project's runs. With a last id (the client's
// Last-Event-ID) it queues the remembered changes after it; resumed is false when that
// id cannot be resumed from (the stream starts with a reset). It returns the stream's
// position now, as an event id.
func (h *Hub) subscribeProject(project, last string) (s *sub, cancel func(), resumed bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.admit(); err != nil {
		return nil, nil, false, err
	}
	s = &sub{wake: make(chan struct{}, 1)}
	if last != "" {
		if seq, ok := h.parseID(last); ok && seq >= h.floor && (len(h.ring) == 0 || seq+1 >= h.ring[h.head].seq) {
			resumed = true
			for i := range h.ring {
				c := h.ring[(h.head+i)%len(h.ring)]
				if c.seq > seq && c.ref.Project == project {
					s.pending = append(s.pending, c)
				}
			}
			if len(s.pending) > h.cfg.Buffer {
				s.pending, resumed = nil, false
			}
		}
	}
	if len(s.pending) > 0 {
		s.notify()
	}
	return s, addSub(h, h.projects, project, s), resumed, nil
}

// position is the id of the newest change. Call under h.mu.
func (h *Hub) position() string { return h.formatID(h.seq) }

func (h *Hub) formatID(seq uint64) string { return h.epoch + "." + strconv.FormatUint(seq, 10) }

// parseID reads a project stream id of this process.
func (h *Hub) parseID(id string) (uint64, bool) {
	if len(id) <= len(h.epoch)+1 || id[:len(h.epoch)] != h.epoch || id[len(h.epoch)] != '.' {
		return 0, false
	}
	seq, err := strconv.ParseUint(id[len(h.epoch)+1:], 10, 64)
	return seq, err == nil
}

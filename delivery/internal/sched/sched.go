package sched

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"time"

	"github.com/google/btree"

	"github.com/duraton/duraton/storage"
)

// Config bounds a Scheduler. Zero fields take the documented defaults.
type Config struct {
	// MaxInFlight caps deliveries in flight across all projects. Default 512.
	MaxInFlight int
	// BufferSize caps the due entries held in the ready list. Default 100,000.
	BufferSize int
	// ProjectCeiling caps one project's deliveries in flight across its keys (0: none).
	ProjectCeiling int
	// ProjectShare is the most of the engine's in-flight capacity one project may hold,
	// so that a project whose endpoints hang cannot starve the others; projects at their
	// share take turns for freed slots. Default MaxInFlight/2 (at least 1); a value of
	// MaxInFlight or more turns it off.
	ProjectShare int
	// MaxCarriedBytes caps the memory of message bodies carried with due entries.
	// Default 64 MiB.
	MaxCarriedBytes int64
}

// Validate reports the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.MaxInFlight < 0:
		return fmt.Errorf("sched: MaxInFlight %d must not be negative", c.MaxInFlight)
	case c.BufferSize < 0:
		return fmt.Errorf("sched: BufferSize %d must not be negative", c.BufferSize)
	case c.ProjectCeiling < 0:
		return fmt.Errorf("sched: ProjectCeiling %d must not be negative", c.ProjectCeiling)
	case c.ProjectShare < 0:
		return fmt.Errorf("sched: ProjectShare %d must not be negative", c.ProjectShare)
	case c.MaxCarriedBytes < 0:
		return fmt.Errorf("sched: MaxCarriedBytes %d must not be negative", c.MaxCarriedBytes)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 512
	}
	if c.BufferSize == 0 {
		c.BufferSize = 100_000
	}
	if c.MaxCarriedBytes == 0 {
		c.MaxCarriedBytes = 64 << 20
	}
	if c.ProjectShare == 0 {
		c.ProjectShare = max(1, c.MaxInFlight/2)
	}
	c.ProjectShare = min(c.ProjectShare, c.MaxInFlight)
	return c
}

// Start is a delivery the scheduler started. The caller sends it and reports back with
// Finish or Retry, exactly once.
type Start struct {
	Entry storage.DueEntry
	Admission
}

// Admission is what a started delivery holds: the waitlist whose slots it took, and the
// rate start the caller must make durable before the request leaves.
type Admission struct {
	flow *flowQueue
	// RateStart (unix ns, 0: the key has no rate) is the start counted in the key's
	// window; RatePeriod the period it counts under.
	RateStart  int64
	RatePeriod time.Duration
	// WokenAt is the slot release that started the delivery (zero: started otherwise).
	WokenAt time.Time
	// GateKey ("": no gate) is the run start gate the delivery passed, and GateTAT the
	// gate's state after it: the caller makes it durable before the request leaves. A
	// start that is then not sent keeps its booking (giving it back could let a later
	// booking made on top of it exceed the pace).
	GateKey string
	GateTAT int64
	// TokenKey ("": none) is the tokenThrottle bucket the run's start passed, and
	// TokenReserve the tokens the start reserved in it (the scope's average per run): the
	// caller makes the reservation durable before the request leaves (tokengate.go).
	TokenKey     string
	TokenReserve int64
}

// PageRequest asks the caller to read up to Limit due entries with index keys above
// After (nil: from the start) and hand them to Paged.
type PageRequest struct {
	After []byte
	Limit int
}

// Decision is what Next decided: deliveries to start now, a page to read, and when to
// call Next again at the latest (0: nothing is scheduled; an Add or a Finish will say).
type Decision struct {
	Starts []Start
	Page   *PageRequest
	WakeAt int64 // unix ns
}

// Scheduler decides which due deliveries start. It is not safe for concurrent use.
type Scheduler struct {
	cfg Config

	ready     *btree.BTreeG[storage.DueEntry]
	complete  bool   // every durable due entry not held elsewhere is in ready
	watermark []byte // when !complete: the highest key ready may hold
	paging    bool   // a PageRequest is out
	deferred  []storage.DueEntry
	carried   int64 // estimated bytes of message bodies carried by held entries

	inFlight int
	running  map[string]struct{} // ids of messages in flight
	later    laterHeap           // entries backed off by Retry
	laterIDs map[string]struct{}
	stopping bool

	gates map[gateKey]*queueGate
	flow  flowState
}

// New makes an empty scheduler whose ready list is not complete: the first Next asks for
// a page from the start of the due index.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Scheduler{
		cfg:      cfg.withDefaults(),
		ready:    btree.NewG(32, lessDue),
		running:  map[string]struct{}{},
		laterIDs: map[string]struct{}{},
		gates:    map[gateKey]*queueGate{},
		flow:     newFlowState(),
	}, nil
}

func lessDue(a, b storage.DueEntry) bool {
	if a.DueAt != b.DueAt {
		return a.DueAt < b.DueAt
	}
	return a.MessageID < b.MessageID
}

// ErrPageOrder is returned by Paged for a page the scheduler did not ask for.
var ErrPageOrder = errors.New("sched: page without a request")

// Add makes newly committed due entries known. An entry above the watermark stays in
// storage only: it is read with a later page. An entry the scheduler already holds (a
// page read after the commit found it first) is not taken twice.
func (s *Scheduler) Add(entries ...storage.DueEntry) {
	if s.paging {
		// The page being read may or may not see these: decide when it is installed.
		s.deferred = append(s.deferred, entries...)
		return
	}
	for _, e := range entries {
		if !s.complete && bytes.Compare(e.Key(), s.watermark) > 0 {
			continue
		}
		if s.holds(e) {
			continue // already paged in from storage and taken on
		}
		if e.Msg != nil {
			if size := carriedSize(e.Msg); s.carried+size <= s.cfg.MaxCarriedBytes {
				s.carried += size
			} else {
				e.Msg = nil // over budget: the attempt reads it from storage
			}
		}
		if old, found := s.ready.ReplaceOrInsert(e); found {
			s.uncarry(old)
		}
	}
	for s.ready.Len() > s.cfg.BufferSize {
		evicted, _ := s.ready.DeleteMax()
		s.uncarry(evicted)
		// The watermark only goes down here: ready may hold entries above it (backed
		// off, unparked), and raising it would skip entries that are only in storage.
		highest, _ := s.ready.Max()
		if k := highest.Key(); s.complete || bytes.Compare(k, s.watermark) < 0 {
			s.watermark = k
		}
		s.complete = false
	}
}

// Paged installs a page read for req. full says the page holds req.Limit entries (so
// more may follow in storage). Entries the scheduler already holds elsewhere are skipped.
func (s *Scheduler) Paged(req PageRequest, entries []storage.DueEntry, full bool) error {
	if !s.paging {
		return ErrPageOrder
	}
	s.paging = false
	for _, e := range entries {
		if !s.holds(e) {
			s.ready.ReplaceOrInsert(e)
		}
	}
	switch {
	case !full:
		s.complete, s.watermark = true, nil
	case len(entries) > 0:
		s.complete, s.watermark = false, entries[len(entries)-1].Key()
	default:
		s.complete, s.watermark = false, req.After
	}
	deferred := s.deferred
	s.deferred = nil
	s.Add(deferred...)
	return nil
}

// PageFailed withdraws a page request whose read failed; the next Next asks again.
func (s *Scheduler) PageFailed() {
	s.paging = false
	deferred := s.deferred
	s.deferred = nil
	s.Add(deferred...)
}

// holds reports whether e is held outside the ready list (in flight, backed off,
// waiting in its key's waitlist or parked at its queue's gate).
func (s *Scheduler) holds(e storage.DueEntry) bool {
	if _, ok := s.running[e.MessageID]; ok {
		return true
	}
	if _, ok := s.laterIDs[e.MessageID]; ok {
		return true
	}
	if q := s.flow.queues[flowID{e.Project, e.FlowKey}]; q != nil && q.waiting.Has(newWaitItem(e, time.Time{})) {
		return true
	}
	if e.Queue != "" {
		if g := s.gates[gateKey{e.Project, e.Queue}]; g != nil {
			if _, ok := g.parkedIDs[e.MessageID]; ok {
				return true
			}
		}
	}
	return false
}

// Stop makes the scheduler start nothing more from waitlists; Next still reports what is
// due, but the caller stops calling it.
func (s *Scheduler) Stop() { s.stopping = true }

// Next starts every due entry while slots are free and says when to look again.
func (s *Scheduler) Next(now time.Time) Decision {
	d, _ := s.next(now, true)
	return d
}

// NextReady is Next without a page request, for callers that cannot read one (the
// attempt that just finished): when the ready list has run dry and storage may hold
// more, it reports wantsPage instead, and the caller leaves the page to whoever calls
// Next. Its Decision's Page is always nil.
func (s *Scheduler) NextReady(now time.Time) (d Decision, wantsPage bool) {
	return s.next(now, false)
}

func (s *Scheduler) next(now time.Time, mayPage bool) (d Decision, wantsPage bool) {
	s.fireTimers(now, &d.Starts)
	s.releaseLater(now)
	for {
		if s.inFlight >= s.cfg.MaxInFlight {
			break // a Finish or Retry frees a slot
		}
		if s.ready.Len() == 0 && !s.complete {
			switch {
			case s.paging:
			case mayPage:
				s.paging = true
				d.Page = &PageRequest{After: s.watermark, Limit: s.cfg.BufferSize}
			default:
				wantsPage = true
			}
			break
		}
		next, ok := s.ready.Min()
		if !ok {
			break
		}
		if next.DueAt > now.UnixNano() {
			d.WakeAt = next.DueAt
			break
		}
		s.ready.DeleteMin()
		if next.Queue != "" && !s.admitQueue(next) {
			continue // parked with its body: it stays counted
		}
		s.uncarry(next)
		if s.needsFlow(next) {
			next.Msg = nil // a waiting delivery holds no body: memory stays per entry, not per byte
			s.enqueueFlow(next, now, &d.Starts)
			continue
		}
		d.Starts = append(d.Starts, s.start(next, Admission{}))
	}
	d.WakeAt = earliest(d.WakeAt, s.flow.timers.next(), s.later.next())
	return d, wantsPage
}

// earliest is the smallest non-zero time, or 0.
func earliest(ts ...int64) int64 {
	var out int64
	for _, t := range ts {
		if t != 0 && (out == 0 || t < out) {
			out = t
		}
	}
	return out
}

// start counts a delivery in flight.
func (s *Scheduler) start(e storage.DueEntry, adm Admission) Start {
	s.inFlight++
	s.flow.inFlight[e.Project]++
	if adm.flow == nil {
		// Started without a waitlist: it still counts against the project's limit.
		s.ceiling(e.Project).Take(time.Time{})
	}
	s.running[e.MessageID] = struct{}{}
	return Start{Entry: e, Admission: adm}
}

// Finish reports a started delivery whose outcome is recorded, with the due entries the
// outcome created (retry, callbacks, resumptions). A queue message that will be retried
// (its id is among follow) keeps its queue slot. It returns the deliveries the freed
// slots started.
func (s *Scheduler) Finish(st Start, follow []storage.DueEntry, now time.Time) []Start {
	e := st.Entry
	retried := false
	for _, f := range follow {
		if f.MessageID == e.MessageID {
			retried = true
		}
	}
	if e.Queue != "" && !retried {
		s.releaseQueueSlot(e.Project, e.Queue, e.MessageID)
	}
	// A follow-up that is due and goes through a waitlist takes its place there before
	// the slot is released, so the release weighs it against the deliveries already
	// waiting, as if it had been published while this one was in flight: the next step of
	// an inline answer keeps its run's turn (older runs first, priority). A retry of e
	// itself is held (e is still running until release), so it is added after.
	var starts []Start
	later := make([]storage.DueEntry, 0, len(follow))
	for _, f := range follow {
		if f.Queue != "" || f.DueAt > now.UnixNano() || !s.needsFlow(f) || s.holds(f) {
			later = append(later, f)
			continue
		}
		f.Msg = nil // a waiting delivery holds no body, as in Next
		s.enqueueFlow(f, now, &starts)
	}
	starts = append(starts, s.release(st, now)...)
	s.Add(later...)
	return starts
}

// Retry reports a started delivery whose attempt could not run to a recorded outcome
// (its message could not be read, its rate start or its outcome could not be stored):
// it is tried again at `at`. sent says whether the request left; if not, its rate start
// is given back. It keeps its queue slot.
func (s *Scheduler) Retry(st Start, at time.Time, sent bool, now time.Time) []Start {
	if !sent && st.RateStart != 0 && st.flow != nil {
		st.flow.key.Window.Remove(st.RateStart)
	}
	starts := s.release(st, now)
	e := st.Entry
	e.Msg = nil
	heap.Push(&s.later, laterItem{at: at.UnixNano(), entry: e})
	s.laterIDs[e.MessageID] = struct{}{}
	return starts
}

// Drop reports a started delivery that turned out to be gone (cancelled, or its run
// ended) before it was sent: it frees what it held and nothing follows.
func (s *Scheduler) Drop(st Start, now time.Time) []Start {
	if st.RateStart != 0 && st.flow != nil {
		st.flow.key.Window.Remove(st.RateStart)
	}
	if st.Entry.Queue != "" {
		s.releaseQueueSlot(st.Entry.Project, st.Entry.Queue, st.Entry.MessageID)
	}
	return s.release(st, now)
}

// release frees the engine and flow slots of a started delivery.
func (s *Scheduler) release(st Start, now time.Time) []Start {
	s.inFlight--
	s.flow.inFlight[st.Entry.Project]--
	if s.flow.inFlight[st.Entry.Project] <= 0 {
		delete(s.flow.inFlight, st.Entry.Project)
	}
	delete(s.running, st.Entry.MessageID)
	var starts []Start
	if st.flow == nil {
		c := s.ceiling(st.Entry.Project)
		c.Release()
		ring := ringOfProject(st.Entry.Project)
		s.pumpRing(ring, now, func() bool { return c.InFlight < c.Limit }, &starts)
	}
	s.releaseFlow(st, now, &starts)
	return starts
}

// Forget removes a message that ended outside an attempt (cancelled, or its run ended)
// from wherever it waits, and frees the queue slot it held. Entries it does not hold are
// ignored.
func (s *Scheduler) Forget(e storage.DueEntry, now time.Time) {
	if old, found := s.ready.Delete(e); found {
		s.uncarry(old)
	}
	s.forgetWaiting(e, now)
	if e.Queue != "" {
		if g := s.gates[gateKey{e.Project, e.Queue}]; g != nil {
			if old, found := g.unpark(e.MessageID); found {
				s.uncarry(old)
			}
			delete(g.holders, e.MessageID)
			// Unpark even when e held no slot: it may have been unparked into ready to
			// take a freed one. Entries unparked beyond the free slots park again.
			s.unpark(g)
		}
	}
}

// Carried is the memory budget in use by carried message bodies.
func (s *Scheduler) Carried() int64 { return s.carried }

// InFlight is the number of deliveries in flight.
func (s *Scheduler) InFlight() int { return s.inFlight }

// carriedSize estimates the memory a carried message holds.
func carriedSize(m *storage.Message) int64 { return int64(len(m.Body)) + 512 }

func (s *Scheduler) uncarry(e storage.DueEntry) {
	if e.Msg != nil {
		s.carried -= carriedSize(e.Msg)
	}
}

// releaseLater moves backed-off entries whose time came back to ready.
func (s *Scheduler) releaseLater(now time.Time) {
	for s.later.Len() > 0 && s.later[0].at <= now.UnixNano() {
		it := heap.Pop(&s.later).(laterItem)
		delete(s.laterIDs, it.entry.MessageID)
		s.ready.ReplaceOrInsert(it.entry)
	}
}

type laterItem struct {
	at    int64
	entry storage.DueEntry
}

// laterHeap orders backed-off entries by the time they may run again.
type laterHeap []laterItem

func (h laterHeap) Len() int           { return len(h) }
func (h laterHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h laterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *laterHeap) Push(x any)        { *h = append(*h, x.(laterItem)) }
func (h *laterHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h laterHeap) next() int64 {
	if len(h) == 0 {
		return 0
	}
	return h[0].at
}

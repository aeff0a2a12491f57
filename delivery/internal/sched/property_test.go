package sched

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// The property test drives the real Scheduler the way the dispatcher does — Add after a
// commit, Next at the times it asks for, pages served from a model of the durable due
// index, Finish / Retry / Drop for every start, operator pauses, cancellations — on an
// injected clock, and checks against its own model that every limit holds at every
// start, that nothing starts twice or early or after it was cancelled, that keys keep
// arrival order, and that everything ends.

var base = time.Unix(1_700_000_000, 0)

func at(ms int64) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

type outcome int

const (
	outDone      outcome = iota // recorded as delivered
	outRedeliver                // recorded as a retry: a new due entry (the record path)
	outRetry                    // could not be recorded: Retry, the request had left
	outUnsent                   // rate start could not be stored: Retry, nothing left
	outCancel                   // cancelled before it starts
)

type pDelivery struct {
	id       string
	project  string
	key      int // -1: no flow-control key
	queue    bool
	arrive   int64 // ms
	service  int64 // ms
	outcomes []outcome
	entry    storage.DueEntry

	pageFirst bool // a page is read between its commit and its Add

	starts   []int64
	running  bool
	finished bool
	gone     bool // cancelled
}

type pKey struct {
	project  string
	limits   flowctl.Limits
	paused   bool
	inFlight int
	shiftMs  int64
	starts   []int64 // ms, of requests that left or may have
	order    []string
}

type propSim struct {
	t         *rapid.T
	s         *Scheduler
	now       int64
	keys      []*pKey
	ds        []*pDelivery
	byID      map[string]*pDelivery
	stored    map[string]storage.DueEntry // the model of the durable due index
	ceiling   int
	maxIn     int
	share     int
	perProj   map[string]int
	queuePar  int
	inFlight  int
	queueHeld map[string]bool
	events    []pEvent

	// A further key "x" some keyed deliveries also hold a slot of (per project), and a
	// start gate "g" some pass (per project).
	extraLimit int
	extraIn    map[string]int
	gate       *storage.StartGate
	gateStarts map[string][]int64 // ms
}

type pEvent struct {
	at   int64
	kind int // 0 arrive, 1 finish, 2 pause, 3 resume, 4 cancel
	d    *pDelivery
	st   Start
	key  int
}

func (p *propSim) fatalf(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("t=%dms: %s", p.now, fmt.Sprintf(format, args...))
}

func (p *propSim) push(e pEvent) {
	p.events = append(p.events, e)
	sort.SliceStable(p.events, func(i, j int) bool { return p.events[i].at < p.events[j].at })
}

func (p *propSim) store(e storage.DueEntry) {
	e.Msg = nil
	p.stored[e.MessageID] = e
}

// page serves a PageRequest from the model of the due index.
func (p *propSim) page(req PageRequest) ([]storage.DueEntry, bool) {
	var all []storage.DueEntry
	for _, e := range p.stored {
		if req.After == nil || bytes.Compare(e.Key(), req.After) > 0 {
			all = append(all, e)
		}
	}
	sort.Slice(all, func(i, j int) bool { return bytes.Compare(all[i].Key(), all[j].Key()) < 0 })
	if len(all) > req.Limit {
		all = all[:req.Limit]
	}
	return all, len(all) == req.Limit
}

// next calls Next until it needs no page, and takes on the starts it decides.
func (p *propSim) next() int64 {
	for i := 0; ; i++ {
		if i > 10_000 {
			p.fatalf("paging does not end")
		}
		dec := p.s.Next(at(p.now))
		p.started(dec.Starts)
		p.checkRates()
		if dec.Page == nil {
			return dec.WakeAt
		}
		entries, full := p.page(*dec.Page)
		if err := p.s.Paged(*dec.Page, entries, full); err != nil {
			p.fatalf("paged: %v", err)
		}
	}
}

func (p *propSim) started(starts []Start) {
	for _, st := range starts {
		d := p.byID[st.Entry.MessageID]
		switch {
		case d == nil:
			p.fatalf("started unknown %s", st.Entry.MessageID)
		case d.running:
			p.fatalf("%s started twice at once", d.id)
		case d.finished || d.gone:
			p.fatalf("%s started after it ended (finished %v, cancelled %v)", d.id, d.finished, d.gone)
		case d.entry.DueAt > at(p.now).UnixNano():
			p.fatalf("%s started before it was due", d.id)
		}
		d.running = true
		d.starts = append(d.starts, p.now)
		p.inFlight++
		if p.inFlight > p.maxIn {
			p.fatalf("%d in flight over the engine cap %d", p.inFlight, p.maxIn)
		}
		if d.queue {
			p.queueHeld[d.id] = true
			if len(p.queueHeld) > p.queuePar {
				p.fatalf("%d queue messages hold slots over parallelism %d", len(p.queueHeld), p.queuePar)
			}
		}
		if d.key >= 0 {
			k := p.keys[d.key]
			if k.paused {
				p.fatalf("%s started while key %d is paused", d.id, d.key)
			}
			k.inFlight++
			if k.limits.Parallelism > 0 && k.inFlight > k.limits.Parallelism {
				p.fatalf("key %d: %d in flight over parallelism %d", d.key, k.inFlight, k.limits.Parallelism)
			}
			if st.RateStart != 0 {
				k.starts = append(k.starts, p.now)
			}
			if !slices.Contains(k.order, d.id) {
				k.order = append(k.order, d.id)
			}
		}
		if len(st.Entry.Extra) > 0 {
			if p.extraIn[d.project]++; p.extraIn[d.project] > p.extraLimit {
				p.fatalf("project %s: %d in flight on the further key over its limit %d", d.project, p.extraIn[d.project], p.extraLimit)
			}
		}
		if st.GateKey != "" {
			p.gateStarts[d.project] = append(p.gateStarts[d.project], p.now)
		}
		p.perProj[d.project]++
		if limit := p.projectLimit(); p.perProj[d.project] > limit {
			p.fatalf("project %s: %d in flight over its limit %d (ceiling %d, share %d)", d.project, p.perProj[d.project], limit, p.ceiling, p.share)
		}
		p.push(pEvent{at: p.now + d.service, kind: 1, d: d, st: st})
	}
}

// projectLimit is what one project may have in flight: its share of the engine, and
// the ceiling when there is one.
func (p *propSim) projectLimit() int {
	limit := min(p.share, p.maxIn)
	if p.ceiling > 0 {
		limit = min(limit, p.ceiling)
	}
	return limit
}

func (p *propSim) finish(e pEvent) {
	d := e.d
	d.running = false
	p.inFlight--
	p.perProj[d.project]--
	if d.key >= 0 {
		p.keys[d.key].inFlight--
	}
	if len(e.st.Entry.Extra) > 0 {
		p.extraIn[d.project]--
	}
	out := outDone
	if n := len(d.starts) - 1; n < len(d.outcomes) {
		out = d.outcomes[n]
	}
	var more []Start
	switch out {
	case outRedeliver:
		next := d.entry
		next.DueAt = at(p.now + 7).UnixNano()
		delete(p.stored, d.id)
		d.entry = next
		p.store(next)
		more = p.s.Finish(e.st, []storage.DueEntry{next}, at(p.now))
	case outRetry, outUnsent:
		if out == outUnsent && d.key >= 0 && e.st.RateStart != 0 {
			// The request never left: its rate start is given back.
			k := p.keys[d.key]
			if i := slices.Index(k.starts, d.starts[len(d.starts)-1]); i >= 0 {
				k.starts = slices.Delete(k.starts, i, i+1)
			}
		}
		more = p.s.Retry(e.st, at(p.now+11), out == outRetry, at(p.now))
	default:
		d.finished = true
		delete(p.stored, d.id)
		delete(p.queueHeld, d.id)
		more = p.s.Finish(e.st, nil, at(p.now))
	}
	p.started(more)
}

func (p *propSim) run() {
	for step := 0; ; step++ {
		if step > 50_000 {
			p.fatalf("no end")
		}
		wake := p.next()
		nextAt := int64(-1)
		if len(p.events) > 0 {
			nextAt = p.events[0].at
		}
		if wake != 0 {
			w := (wake - base.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond)
			if w < p.now {
				p.fatalf("wake-up %dms is in the past", w)
			}
			if nextAt < 0 || w < nextAt {
				nextAt = w
			}
		}
		if nextAt < 0 {
			break
		}
		p.now = max(p.now, nextAt)
		for len(p.events) > 0 && p.events[0].at <= p.now {
			e := p.events[0]
			p.events = p.events[1:]
			p.handle(e)
		}
	}
	p.checkEnd()
}

func (p *propSim) handle(e pEvent) {
	switch e.kind {
	case 0:
		d := e.d
		if d.gone {
			return
		}
		p.store(d.entry) // committed
		if d.pageFirst {
			// The dispatcher may read a page of the due index between a commit and the
			// Add that follows it: the entry is then found twice.
			p.next()
		}
		p.s.Add(d.entry)
	case 1:
		p.finish(e)
	case 2, 3:
		paused := e.kind == 2
		p.keys[e.key].paused = paused
		_, starts := p.s.ChangeKey(p.keys[e.key].project, fmt.Sprintf("k%d", e.key), func(k *flowctl.Key) { k.Paused = paused }, at(p.now))
		p.started(starts)
	case 4:
		d := e.d
		if d.running || d.finished || len(d.starts) > 0 {
			return // only cancel what never started
		}
		d.gone = true
		delete(p.stored, d.id)
		p.s.Forget(d.entry, at(p.now))
	}
}

// checkRates compares each key's rate count with the model's: the scheduler neither
// forgets a start nor keeps one that was given back. (A key no delivery asks for reports
// its count over the default period, so only asked keys are compared.)
func (p *propSim) checkRates() {
	for ki, k := range p.keys {
		if k.limits.Rate == 0 {
			continue
		}
		if q := p.s.flow.queues[flowID{k.project, fmt.Sprintf("k%d", ki)}]; q == nil || q.key.Asking() == 0 {
			continue
		}
		want := 0
		for _, st := range k.starts {
			if st > p.now-k.limits.Period.Milliseconds() && st <= p.now {
				want++
			}
		}
		if got := p.s.FlowKey(k.project, fmt.Sprintf("k%d", ki), at(p.now)).RateCount; got != want {
			p.fatalf("key %d: rate count %d, the model %d (starts %v)", ki, got, want, k.starts)
		}
	}
}

func (p *propSim) checkEnd() {
	for _, d := range p.ds {
		if !d.gone && !d.finished {
			p.fatalf("%s never finished (starts %v, running %v)", d.id, d.starts, d.running)
		}
	}
	if p.s.InFlight() != 0 || p.s.Carried() != 0 {
		p.fatalf("scheduler ends with %d in flight, %d bytes carried", p.s.InFlight(), p.s.Carried())
	}
	if len(p.s.flow.extra) != 0 {
		p.fatalf("scheduler ends holding further keys %v", p.s.flow.extra)
	}
	for project, starts := range p.gateStarts {
		// The gate's bookings conform to its GCRA: limit at once from idle, then one
		// every period/limit.
		interval := p.gate.PerMs / int64(p.gate.Limit)
		tau := interval * int64(p.gate.Limit-1)
		var tat int64 = -1 << 62
		for _, st := range starts {
			if st < tat-tau {
				p.fatalf("project %s: gate start at %dms before %dms (starts %v)", project, st, tat-tau, starts)
			}
			tat = max(tat, st) + interval
		}
	}
	for ki, k := range p.keys {
		if k.limits.Rate > 0 {
			per := k.limits.Period.Milliseconds()
			for j, sj := range k.starts {
				n := 0
				for _, si := range k.starts {
					if si > sj-per && si <= sj {
						n++
					}
				}
				if n > k.limits.Rate {
					p.fatalf("key %d: %d starts in (%d, %d], rate %d per %v: %v", ki, n, sj-per, sj, k.limits.Rate, k.limits.Period, k.starts[:j+1])
				}
			}
		}
		// Keys keep arrival order for their first starts.
		var arrived []string
		for _, d := range p.ds {
			if d.key == ki && !d.gone && !d.queue {
				arrived = append(arrived, d.id)
			}
		}
		var first []string
		for _, id := range k.order {
			if !p.byID[id].queue {
				first = append(first, id)
			}
		}
		if !slices.Equal(first, arrived) {
			p.fatalf("key %d: first starts %v, arrival %v", ki, first, arrived)
		}
	}
}

func newPropSim(t *rapid.T) *propSim {
	p := &propSim{t: t, byID: map[string]*pDelivery{}, stored: map[string]storage.DueEntry{}, queueHeld: map[string]bool{}, perProj: map[string]int{},
		extraIn: map[string]int{}, gateStarts: map[string][]int64{}}
	p.extraLimit = rapid.IntRange(0, 3).Draw(t, "extraLimit")
	if rapid.Bool().Draw(t, "gate") {
		p.gate = &storage.StartGate{Key: "g\x00v", Limit: rapid.IntRange(1, 3).Draw(t, "gateLimit"), PerMs: 1000 * int64(rapid.IntRange(1, 4).Draw(t, "gatePeriod"))}
	}
	p.ceiling = rapid.IntRange(0, 5).Draw(t, "ceiling")
	p.maxIn = rapid.IntRange(1, 8).Draw(t, "maxInFlight")
	p.share = rapid.IntRange(0, 8).Draw(t, "projectShare")
	p.queuePar = rapid.IntRange(1, 3).Draw(t, "queueParallelism")
	buffer := rapid.IntRange(1, 12).Draw(t, "bufferSize")
	s, err := New(Config{MaxInFlight: p.maxIn, BufferSize: buffer, ProjectCeiling: p.ceiling, ProjectShare: p.share})
	if err != nil {
		t.Fatal(err)
	}
	p.s = s
	if p.share == 0 {
		p.share = max(1, p.maxIn/2) // the default
	}
	s.ConfigureQueue("p", "q", &QueueSettings{Parallelism: p.queuePar})
	unit := rapid.SampledFrom([]int64{1, 250, 1000}).Draw(t, "unit")
	nKeys := rapid.IntRange(1, 4).Draw(t, "keys")
	for i := range nKeys {
		l := flowctl.Limits{
			Parallelism: rapid.IntRange(0, 3).Draw(t, "parallelism"),
			Rate:        rapid.IntRange(0, 4).Draw(t, "rate"),
			Period:      time.Duration(rapid.IntRange(1, 4).Draw(t, "period")) * time.Second,
		}
		if l.Parallelism == 0 && l.Rate == 0 {
			l.Parallelism = 1
		}
		p.keys = append(p.keys, &pKey{limits: l, project: []string{"p", "r"}[i%2], shiftMs: unit * int64(rapid.IntRange(-2, 2).Draw(t, "shift"))})
		if rapid.IntRange(0, 3).Draw(t, "pauses") == 0 {
			from := unit * int64(rapid.IntRange(0, 30).Draw(t, "pauseFrom"))
			p.push(pEvent{at: from, kind: 2, key: i})
			p.push(pEvent{at: from + unit*int64(rapid.IntRange(1, 15).Draw(t, "pauseFor")), kind: 3, key: i})
		}
	}
	n := rapid.IntRange(1, 40).Draw(t, "deliveries")
	for i := range n {
		d := &pDelivery{
			id:      fmt.Sprintf("msg_%05d", i),
			key:     rapid.IntRange(-1, nKeys-1).Draw(t, "key"),
			arrive:  unit * int64(rapid.IntRange(0, 30).Draw(t, "arrive")),
			service: unit * int64(rapid.IntRange(0, 8).Draw(t, "service")),
		}
		// Arrivals are in id order, so a key's arrival order is its id order.
		if i > 0 {
			d.arrive = max(d.arrive, p.ds[i-1].arrive)
		}
		d.project = "p"
		if d.key >= 0 {
			d.project = p.keys[d.key].project
		} else if rapid.Bool().Draw(t, "otherProject") {
			d.project = "r"
		}
		d.queue = d.key < 0 && d.project == "p" && rapid.Bool().Draw(t, "queue")
		d.pageFirst = rapid.IntRange(0, 3).Draw(t, "pageFirst") == 0
		for range rapid.IntRange(0, 2).Draw(t, "troubles") {
			d.outcomes = append(d.outcomes, outcome(rapid.IntRange(int(outRedeliver), int(outUnsent)).Draw(t, "outcome")))
		}
		d.entry = storage.DueEntry{DueAt: at(d.arrive).UnixNano(), MessageID: d.id, Project: d.project, OrderAt: d.arrive}
		if d.key >= 0 {
			d.entry.FlowKey, d.entry.Limits = fmt.Sprintf("k%d", d.key), p.keys[d.key].limits
			if p.extraLimit > 0 && rapid.Bool().Draw(t, "holdsExtra") {
				d.entry.Extra = []storage.ExtraKey{{Key: "x", Parallelism: p.extraLimit}}
			}
			if p.gate != nil && rapid.Bool().Draw(t, "gated") {
				d.entry.Gate = p.gate
			}
			// A key's deliveries share a shift (a workflow's priority), so its order
			// stays arrival order; the shift ranks the key in the rings.
			d.entry.ShiftMs = p.keys[d.key].shiftMs
			d.entry.OrderAt -= d.entry.ShiftMs
		}
		if d.queue {
			d.entry.Queue = "q"
		}
		if rapid.IntRange(0, 5).Draw(t, "carry") == 0 {
			d.entry.Msg = &storage.Message{ID: d.id, Body: []byte("body")}
		}
		p.ds = append(p.ds, d)
		p.byID[d.id] = d
		p.push(pEvent{at: d.arrive, kind: 0, d: d})
		if rapid.IntRange(0, 6).Draw(t, "cancel") == 0 {
			p.push(pEvent{at: d.arrive + unit*int64(rapid.IntRange(0, 5).Draw(t, "cancelAfter")), kind: 4, d: d})
		}
	}
	return p
}

func TestPropertyScheduler(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) { newPropSim(t).run() })
}

package flowctl_test

import (
	"container/heap"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/duraton/duraton/flowctl"
)

// The simulator runs a dispatcher over flowctl on an injected clock (integer
// milliseconds from base) and checks, against its own model of the state, that every
// limit holds, that every blocked head is blocked for a reason the model agrees with,
// and that every delivery starts and finishes, in arrival order within its key.

var base = time.Unix(1_700_000_000, 0)

func clock(ms int64) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

type simKey struct {
	limits      flowctl.Limits
	key         *flowctl.Key
	paused      bool    // the model's pause, set and cleared by the pause and resume events
	waitlist    []int   // delivery ids, FIFO
	arrived     []int   // ids in arrival order
	started     []int   // ids in start order
	starts      []int64 // start times, ms, ascending
	inFlight    int
	wakes       map[int64]bool // wake-ups scheduled
	maxInFlight int
}

type simDelivery struct {
	key     int
	arrive  int64 // ms
	service int64 // ms
	arrTie  int   // order among events at the same instant
	finTie  int
	started bool
	done    bool
}

type eventKind int

const (
	evArrive eventKind = iota
	evFinish
	evWake
	evPause
	evResume
)

type event struct {
	at   int64
	tie  int
	seq  int // creation order: the last tie-break, so the order is total
	kind eventKind
	id   int // delivery id, or key index for wake, pause and resume
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if a.at != b.at {
		return a.at < b.at
	}
	if a.tie != b.tie {
		return a.tie < b.tie
	}
	return a.seq < b.seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type sim struct {
	t          *rapid.T
	keys       []*simKey
	deliveries []*simDelivery
	ceiling    *flowctl.Ceiling
	ceilingMax int // the model's ceiling limit
	inFlight   int // the model's project in-flight count
	queue      eventQueue
	seq        int
	rr         int // round-robin cursor over keys
	now        int64
	steps      int
}

const maxSteps = 20_000

func (s *sim) push(at int64, tie int, kind eventKind, id int) {
	s.seq++
	heap.Push(&s.queue, event{at: at, tie: tie, seq: s.seq, kind: kind, id: id})
}

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("t=%dms: %s", s.now, fmt.Sprintf(format, args...))
}

// countIn is the model's number of starts of k in (at-period, at].
func countIn(starts []int64, at int64, period time.Duration) int {
	p := period.Milliseconds()
	n := 0
	for _, st := range starts {
		if st > at-p && st <= at {
			n++
		}
	}
	return n
}

// retryModel is the earliest instant after now at which fewer than rate of starts lie in
// the window, found by trying every instant at which a start leaves it.
func retryModel(starts []int64, now int64, rate int, period time.Duration) int64 {
	p := period.Milliseconds()
	cands := make([]int64, 0, len(starts))
	for _, st := range starts {
		if st+p > now {
			cands = append(cands, st+p)
		}
	}
	slices.Sort(cands)
	for _, c := range cands {
		if countIn(starts, c, period) < rate {
			return c
		}
	}
	return -1
}

func (s *sim) run() {
	for len(s.queue) > 0 {
		if s.steps++; s.steps > maxSteps {
			s.fatalf("no end after %d events", maxSteps)
		}
		e := heap.Pop(&s.queue).(event)
		if e.at < s.now {
			s.fatalf("clock went back to %d", e.at)
		}
		s.now = e.at
		switch e.kind {
		case evArrive:
			d := s.deliveries[e.id]
			k := s.keys[d.key]
			k.key.Ask(k.limits)
			k.waitlist = append(k.waitlist, e.id)
			k.arrived = append(k.arrived, e.id)
		case evFinish:
			d := s.deliveries[e.id]
			k := s.keys[d.key]
			flowctl.Release(flowctl.Parallelism{K: k.key}, flowctl.Rate{K: k.key}, s.ceiling)
			k.key.Unask(k.limits)
			k.inFlight--
			s.inFlight--
			d.done = true
		case evWake:
			delete(s.keys[e.id].wakes, e.at)
		case evPause:
			s.keys[e.id].key.Paused, s.keys[e.id].paused = true, true
		case evResume:
			s.keys[e.id].key.Paused, s.keys[e.id].paused = false, false
		}
		s.dispatch()
		s.checkState()
	}
	s.checkEnd()
}

// dispatch admits heads of waitlists until none can start, one per key per turn.
func (s *sim) dispatch() {
	for {
		admitted := false
		for i := range s.keys {
			ki := (s.rr + i) % len(s.keys)
			if s.try(ki) {
				s.rr = (ki + 1) % len(s.keys)
				admitted = true
				break
			}
		}
		if !admitted {
			return
		}
	}
}

func (s *sim) try(ki int) bool {
	k := s.keys[ki]
	if len(k.waitlist) == 0 {
		return false
	}
	now := clock(s.now)
	startsBefore, inFlightBefore, ceilingBefore := k.key.Window.Starts(), k.key.InFlight, s.ceiling.InFlight
	par, rate := flowctl.Parallelism{K: k.key}, flowctl.Rate{K: k.key}
	d := flowctl.Admit(now, par, rate, s.ceiling)

	parFull := k.paused || (k.limits.Parallelism > 0 && k.inFlight >= k.limits.Parallelism)
	rateFull := k.limits.Rate > 0 && countIn(k.starts, s.now, k.limits.Period) >= k.limits.Rate
	ceilingFull := s.ceilingMax > 0 && s.inFlight >= s.ceilingMax

	if !d.Admitted {
		if !slices.Equal(startsBefore, k.key.Window.Starts()) || inFlightBefore != k.key.InFlight || ceilingBefore != s.ceiling.InFlight {
			s.fatalf("key %d: a blocked admission spent something", ki)
		}
		switch d.BlockedBy {
		case par:
			if !parFull || !d.RetryAt.IsZero() {
				s.fatalf("key %d: blocked by %s with %d in flight (paused %v), retry %v", ki, par, k.inFlight, k.paused, d.RetryAt)
			}
		case rate:
			if parFull || !rateFull {
				s.fatalf("key %d: blocked by %s with parallelism full %v, %d starts in the window", ki, rate, parFull, countIn(k.starts, s.now, k.limits.Period))
			}
			want := retryModel(k.starts, s.now, k.limits.Rate, k.limits.Period)
			if got := d.RetryAt.Sub(base); got != time.Duration(want)*time.Millisecond {
				s.fatalf("key %d: retry at %v, the model says %dms (starts %v)", ki, got, want, k.starts)
			}
			if !k.wakes[want] {
				k.wakes[want] = true
				s.push(want, -1, evWake, ki)
			}
		case s.ceiling:
			if parFull || rateFull || !ceilingFull || !d.RetryAt.IsZero() {
				s.fatalf("key %d: blocked by %s with %d in the project, key full %v/%v", ki, s.ceiling, s.inFlight, parFull, rateFull)
			}
		default:
			s.fatalf("key %d: blocked by %v", ki, d.BlockedBy)
		}
		return false
	}
	if parFull || rateFull || ceilingFull {
		s.fatalf("key %d: admitted with parallelism full %v, rate full %v, ceiling full %v", ki, parFull, rateFull, ceilingFull)
	}
	id := k.waitlist[0]
	k.waitlist = k.waitlist[1:]
	k.started = append(k.started, id)
	k.starts = append(k.starts, s.now)
	k.inFlight++
	k.maxInFlight = max(k.maxInFlight, k.inFlight)
	s.inFlight++
	dl := s.deliveries[id]
	dl.started = true
	s.push(s.now+dl.service, dl.finTie, evFinish, id)

	if k.limits.Parallelism > 0 && k.inFlight > k.limits.Parallelism {
		s.fatalf("key %d: %d in flight over parallelism %d", ki, k.inFlight, k.limits.Parallelism)
	}
	if k.limits.Rate > 0 && countIn(k.starts, s.now, k.limits.Period) > k.limits.Rate {
		s.fatalf("key %d: over rate %d per %v at the start", ki, k.limits.Rate, k.limits.Period)
	}
	if s.ceilingMax > 0 && s.inFlight > s.ceilingMax {
		s.fatalf("%d in the project over the ceiling %d", s.inFlight, s.ceilingMax)
	}
	return true
}

// checkState compares flowctl's state with the model after every event.
func (s *sim) checkState() {
	if s.ceiling.InFlight != s.inFlight {
		s.fatalf("ceiling holds %d, the model %d", s.ceiling.InFlight, s.inFlight)
	}
	if s.ceilingMax > 0 && s.inFlight > s.ceilingMax {
		s.fatalf("%d in the project over the ceiling %d", s.inFlight, s.ceilingMax)
	}
	for ki, k := range s.keys {
		if k.key.InFlight != k.inFlight {
			s.fatalf("key %d holds %d slots, the model %d", ki, k.key.InFlight, k.inFlight)
		}
		if k.limits.Parallelism > 0 && k.inFlight > k.limits.Parallelism {
			s.fatalf("key %d: %d in flight over parallelism %d", ki, k.inFlight, k.limits.Parallelism)
		}
		if asking := len(k.waitlist) + k.inFlight; k.key.Asking() != asking {
			s.fatalf("key %d: %d asking, the model %d", ki, k.key.Asking(), asking)
		}
		want := k.limits
		if want.Rate == 0 {
			want.Period = flowctl.DefaultPeriod // a period without a rate is not in force
		}
		if k.key.Asking() > 0 && k.key.Effective() != want {
			s.fatalf("key %d: effective %+v, asked %+v", ki, k.key.Effective(), k.limits)
		}
		if len(k.waitlist) > 0 && len(s.queue) == 0 {
			s.fatalf("key %d: %d waiting and nothing left to wake them", ki, len(k.waitlist))
		}
	}
}

func (s *sim) checkEnd() {
	for id, d := range s.deliveries {
		if !d.started || !d.done {
			s.fatalf("delivery %d: started %v, done %v", id, d.started, d.done)
		}
	}
	for ki, k := range s.keys {
		if !slices.Equal(k.started, k.arrived) {
			s.fatalf("key %d: started %v, arrived %v", ki, k.started, k.arrived)
		}
		if k.key.InFlight != 0 || k.key.Asking() != 0 {
			s.fatalf("key %d: %d in flight, %d asking at the end", ki, k.key.InFlight, k.key.Asking())
		}
		// Every window of length period holds at most rate starts: the fullest window
		// ends at a start, so try every pair.
		if r := k.limits.Rate; r > 0 {
			p := k.limits.Period.Milliseconds()
			for j, sj := range k.starts {
				n := 0
				for _, si := range k.starts[:j+1] {
					if si > sj-p {
						n++
					}
				}
				// Starts at the same instant as sj but after it in the log count too.
				for _, si := range k.starts[j+1:] {
					if si == sj {
						n++
					}
				}
				if n > r {
					s.fatalf("key %d: %d starts in (%d, %d], rate %d per %v: %v", ki, n, sj-p, sj, r, k.limits.Period, k.starts)
				}
			}
		}
		// The key keeps its window while a start in it may still count, and no longer.
		if len(k.starts) > 0 {
			last := k.starts[len(k.starts)-1]
			end := max(s.now, last)
			recent := k.limits.Rate > 0 && end < last+k.limits.Period.Milliseconds()
			if k.key.Paused {
				s.fatalf("key %d still paused", ki)
			}
			if got := k.key.Idle(clock(end)); got == recent {
				s.fatalf("key %d idle %v at %d, last start %d", ki, got, end, last)
			}
			if !k.key.Idle(clock(last + k.limits.Period.Milliseconds())) {
				s.fatalf("key %d not idle once its window has emptied", ki)
			}
		}
	}
}

func genLimits(t *rapid.T, i int) flowctl.Limits {
	return rapid.Custom(func(t *rapid.T) flowctl.Limits {
		return flowctl.Limits{
			Parallelism: rapid.IntRange(0, 4).Draw(t, "parallelism"),
			Rate:        rapid.IntRange(0, 5).Draw(t, "rate"),
			Period:      time.Duration(rapid.IntRange(1, 5).Draw(t, "period")) * time.Second,
		}
	}).Filter(func(l flowctl.Limits) bool { return l.Parallelism > 0 || l.Rate > 0 }).Draw(t, fmt.Sprintf("key%d", i))
}

func newSim(t *rapid.T) *sim {
	s := &sim{t: t}
	nKeys := rapid.IntRange(1, 5).Draw(t, "keys")
	// The time unit: whole seconds make starts land exactly on window edges.
	unit := rapid.SampledFrom([]int64{1, 250, 1000}).Draw(t, "unit")
	for i := range nKeys {
		k := &simKey{limits: genLimits(t, i), key: flowctl.NewKey(fmt.Sprintf("k%d", i)), wakes: map[int64]bool{}}
		// Some keys are paused for a while; a paused key keeps its waitlist.
		if rapid.IntRange(0, 3).Draw(t, "pauses") == 0 {
			from := unit * int64(rapid.IntRange(0, 40).Draw(t, "pauseFrom"))
			until := from + unit*int64(rapid.IntRange(1, 20).Draw(t, "pauseFor"))
			s.push(from, -2, evPause, i)
			s.push(until, -2, evResume, i)
		}
		s.keys = append(s.keys, k)
	}
	s.ceilingMax = rapid.IntRange(0, 6).Draw(t, "ceiling")
	s.ceiling = &flowctl.Ceiling{Scope: "p", Limit: s.ceilingMax}
	n := rapid.IntRange(1, 60).Draw(t, "deliveries")
	for id := range n {
		d := &simDelivery{
			key:     rapid.IntRange(0, nKeys-1).Draw(t, "key"),
			arrive:  unit * int64(rapid.IntRange(0, 40).Draw(t, "arrive")),
			service: unit * int64(rapid.IntRange(0, 12).Draw(t, "service")),
			arrTie:  rapid.IntRange(0, 3).Draw(t, "arriveTie"),
			finTie:  rapid.IntRange(0, 3).Draw(t, "finishTie"),
		}
		s.deliveries = append(s.deliveries, d)
		s.push(d.arrive, d.arrTie, evArrive, id)
	}
	return s
}

func TestPropertyDispatcher(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) { newSim(t).run() })
}

// The window against a full log, with the rate changing between admissions and the
// period fixed: every decision and every retry time agree.
func TestPropertyWindowMatchesLog(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		period := time.Duration(rapid.IntRange(1, 5).Draw(t, "period")) * time.Second
		var w flowctl.Window
		var log []int64 // ms
		now := int64(0)
		for range rapid.IntRange(1, 80).Draw(t, "ops") {
			now += 250 * int64(rapid.IntRange(0, 6).Draw(t, "advance"))
			rate := rapid.IntRange(1, 5).Draw(t, "rate")
			ok, retry := w.Allows(clock(now), rate, period)
			wantOK := countIn(log, now, period) < rate
			if ok != wantOK {
				t.Fatalf("t=%d rate %d: allows %v, the log says %v (%v)", now, rate, ok, wantOK, log)
			}
			if !ok {
				if want := retryModel(log, now, rate, period); retry != clock(want) {
					t.Fatalf("t=%d rate %d: retry %v, the log says %d", now, rate, retry.Sub(base), want)
				}
				continue
			}
			w.Take(clock(now), rate)
			log = append(log, now)
			if got, want := w.Count(clock(now), period), countIn(log, now, period); got > want || (want <= rate && got != want) {
				t.Fatalf("t=%d: count %d, the log says %d", now, got, want)
			}
			if len(w.Starts()) > rate {
				t.Fatalf("t=%d: the window keeps %d starts over rate %d", now, len(w.Starts()), rate)
			}
		}
	})
}

// Effective against a direct reading of the rule, under random asks, unasks and pins.
func TestPropertyEffective(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		k := flowctl.NewKey("k")
		var asked []flowctl.Limits
		genL := rapid.Custom(func(t *rapid.T) flowctl.Limits {
			return flowctl.Limits{
				Parallelism: rapid.IntRange(0, 4).Draw(t, "parallelism"),
				Rate:        rapid.IntRange(0, 5).Draw(t, "rate"),
				Period:      time.Duration(rapid.IntRange(1, 5).Draw(t, "period")) * time.Second,
			}
		})
		for range rapid.IntRange(1, 40).Draw(t, "ops") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				l := genL.Draw(t, "ask")
				k.Ask(l)
				asked = append(asked, l)
			case 2:
				if len(asked) > 0 {
					i := rapid.IntRange(0, len(asked)-1).Draw(t, "unask")
					k.Unask(asked[i])
					asked = slices.Delete(asked, i, i+1)
				}
			case 3:
				k.Pins = flowctl.Pins{
					Parallelism: rapid.IntRange(0, 4).Draw(t, "pinParallelism"),
					Rate:        rapid.IntRange(0, 5).Draw(t, "pinRate"),
					Period:      time.Duration(rapid.IntRange(0, 5).Draw(t, "pinPeriod")) * time.Second,
				}
			}
			want := flowctl.Limits{Period: flowctl.DefaultPeriod}
			if len(asked) > 0 {
				byRate := slices.Clone(asked)
				sort.Slice(byRate, func(i, j int) bool {
					if byRate[i].Rate != byRate[j].Rate {
						return byRate[i].Rate > byRate[j].Rate
					}
					return byRate[i].Period < byRate[j].Period
				})
				if byRate[0].Rate > 0 {
					want.Rate, want.Period = byRate[0].Rate, byRate[0].Period
				}
				for _, l := range asked {
					want.Parallelism = max(want.Parallelism, l.Parallelism)
				}
			}
			if k.Pins.Parallelism > 0 {
				want.Parallelism = k.Pins.Parallelism
			}
			if k.Pins.Rate > 0 {
				want.Rate, want.Period = k.Pins.Rate, k.Pins.Period
				if want.Period == 0 {
					want.Period = flowctl.DefaultPeriod
				}
			}
			if got := k.Effective(); got != want {
				t.Fatalf("effective %+v, want %+v (asked %v, pins %+v)", got, want, asked, k.Pins)
			}
			if k.Asking() != len(asked) {
				t.Fatalf("asking %d, want %d", k.Asking(), len(asked))
			}
		}
	})
}

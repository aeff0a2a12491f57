package flowctl_test

import (
	"slices"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/duraton/duraton/flowctl"
)

// Property tests of flowctl's own types against direct models. The dispatcher's use of
// them (waitlists, rings, timers, paging) is tested against the real scheduler in
// delivery/internal/sched.

var base = time.Unix(1_700_000_000, 0)

func clock(ms int64) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

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

// Admit is two-phase: a blocked admission takes nothing from any constraint, an admitted
// one takes from every one, and the blocker is the first constraint that is full.
func TestPropertyAdmitAllOrNothing(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		k := flowctl.NewKey("k")
		l := flowctl.Limits{
			Parallelism: rapid.IntRange(0, 3).Draw(t, "parallelism"),
			Rate:        rapid.IntRange(0, 3).Draw(t, "rate"),
			Period:      time.Duration(rapid.IntRange(1, 3).Draw(t, "period")) * time.Second,
		}
		k.Ask(l)
		c := &flowctl.Ceiling{Scope: "p", Limit: rapid.IntRange(0, 4).Draw(t, "ceiling")}
		par, rate := flowctl.Parallelism{K: k}, flowctl.Rate{K: k}
		now := int64(0)
		for range rapid.IntRange(1, 60).Draw(t, "ops") {
			now += 250 * int64(rapid.IntRange(0, 4).Draw(t, "advance"))
			if k.InFlight > 0 && rapid.Bool().Draw(t, "release") {
				flowctl.Release(par, rate, c)
				continue
			}
			starts, inFlight, ceil := k.Window.Starts(), k.InFlight, c.InFlight
			d := flowctl.Admit(clock(now), par, rate, c)
			parFull := l.Parallelism > 0 && inFlight >= l.Parallelism
			inWindow := 0
			for _, st := range starts {
				if st > clock(now).Add(-l.Period).UnixNano() && st <= clock(now).UnixNano() {
					inWindow++
				}
			}
			rateFull := l.Rate > 0 && inWindow >= l.Rate
			ceilFull := c.Limit > 0 && ceil >= c.Limit
			if d.Admitted {
				if parFull || rateFull || ceilFull {
					t.Fatalf("t=%d: admitted with parallelism full %v, rate full %v, ceiling full %v", now, parFull, rateFull, ceilFull)
				}
				if k.InFlight != inFlight+1 || c.InFlight != ceil+1 || (l.Rate > 0 && len(k.Window.Starts()) == 0) {
					t.Fatalf("t=%d: an admission did not take every constraint", now)
				}
				continue
			}
			if !slices.Equal(starts, k.Window.Starts()) || k.InFlight != inFlight || c.InFlight != ceil {
				t.Fatalf("t=%d: a blocked admission spent something", now)
			}
			var want flowctl.Constraint
			switch {
			case parFull:
				want = par
			case rateFull:
				want = rate
			case ceilFull:
				want = c
			default:
				t.Fatalf("t=%d: blocked by %v with nothing full", now, d.BlockedBy)
			}
			if d.BlockedBy != want {
				t.Fatalf("t=%d: blocked by %v, want %v", now, d.BlockedBy, want)
			}
		}
	})
}

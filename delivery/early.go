package delivery

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/duraton/duraton/storage"
)

// Early outcomes. The official workflow SDKs publish a step (POST /v2/batch) or end the
// run (DELETE /v2/workflows/runs/{id}) and only then answer the delivery that did it;
// Duraton commits the publish and, once the answer is in, the delivery's outcome: two
// commits per step. When the run has exactly one delivery in flight, that publish can
// only come from it (the SDK answers after the publish returns), so the delivery's
// outcome, delivered, is written in the publish's own transaction, and its answer, when
// it comes, only frees its slot.
//
// What changes: the outcome is recorded as a 200 at the publish, whatever the answer
// then is (an SDK answers 2xx after a successful publish; if it did not, its step is
// durable all the same and the run goes on, where a retry would only have published it
// again). A run with several deliveries in flight (parallel branches) records each
// outcome when its answer comes, as before.

// flightKey names a run.
type flightKey struct{ project, runID string }

// flight is a workflow delivery being sent.
type flight struct {
	m        *Message
	recorded bool // its outcome was written early (under flights.mu)
}

// flights are the workflow deliveries in flight, by run.
type flights struct {
	mu    sync.Mutex
	byRun map[flightKey][]*flight
}

// begin notes that m is being sent.
func (f *flights) begin(m *Message) *flight {
	fl := &flight{m: m}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byRun == nil {
		f.byRun = map[flightKey][]*flight{}
	}
	k := flightKey{m.Project, m.RunID}
	f.byRun[k] = append(f.byRun[k], fl)
	return fl
}

// end notes that fl's answer is in; it reports whether fl's outcome was written early.
func (f *flights) end(fl *flight) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := flightKey{fl.m.Project, fl.m.RunID}
	list := f.byRun[k]
	for i, x := range list {
		if x == fl {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(f.byRun, k)
	} else {
		f.byRun[k] = list
	}
	return fl.recorded
}

// sole is the run's one delivery in flight whose outcome is not written yet, or nil.
func (f *flights) sole(project, runID string) *flight {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := f.byRun[flightKey{project, runID}]
	if len(list) != 1 || list[0].recorded {
		return nil
	}
	return list[0]
}

// markRecorded notes that the early outcomes of fls are committed.
func (f *flights) markRecorded(fls []*flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range fls {
		fl.recorded = true
	}
}

// early is an outcome to write in another transaction: a delivery's, planned.
type early struct {
	fl   *flight
	out  Outcome
	plan outcomePlan
}

// earlyOutcome plans the early outcome of the run's sole delivery in flight, if any.
func (e *Engine) earlyOutcome(project, runID string, now time.Time) *early {
	fl := e.flights.sole(project, runID)
	if fl == nil || fl.m.Callback != nil {
		return nil // a callback reports the answer itself: it waits for it
	}
	out := Outcome{Verdict: Delivered, Response: storage.Response{Status: http.StatusOK}}
	return &early{fl: fl, out: out, plan: e.planOutcome(fl.m, out, now)}
}

// earlyOutcomes plans the early outcomes a publication allows: one per run it adds
// steps to.
func (e *Engine) earlyOutcomes(pubs []Publication, now time.Time) []*early {
	var out []*early
	var seen map[flightKey]bool // made for the first step: plain publishes pay nothing
	for _, p := range pubs {
		m := p.Message
		k := flightKey{m.Project, m.RunID}
		if m.RunID == "" || p.Init != nil || seen[k] {
			continue
		}
		if seen == nil {
			seen = map[flightKey]bool{}
		}
		seen[k] = true
		if ea := e.earlyOutcome(m.Project, m.RunID, now); ea != nil {
			out = append(out, ea)
		}
	}
	return out
}

// writtenEarly is an early outcome its transaction wrote.
type writtenEarly struct {
	ea *early
	fx effects
}

// earlyTx writes early outcomes. One whose delivery moved on meanwhile (cancelled, or
// its answer recorded) is skipped: recordTx wrote nothing for it.
func (e *Engine) earlyTx(tx *storage.Tx, eas []*early, now time.Time) ([]writtenEarly, error) {
	var done []writtenEarly
	for _, ea := range eas {
		fx, err := e.recordTx(tx, ea.fl.m, ea.out, &ea.plan, now)
		if errors.Is(err, storage.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		done = append(done, writtenEarly{ea: ea, fx: fx})
	}
	return done, nil
}

// earlyCommitted applies committed early outcomes: their deliveries' answers will only
// free their slots.
func (e *Engine) earlyCommitted(done []writtenEarly) {
	if len(done) == 0 {
		return
	}
	fls := make([]*flight, len(done))
	for i, d := range done {
		fls[i] = d.ea.fl
	}
	e.flights.markRecorded(fls)
	for _, d := range done {
		e.disp.apply(effects{add: d.fx.add, forget: d.fx.forget, tokens: d.fx.tokens})
		e.observeOutcome(d.ea.fl.m, d.ea.plan.log.State, d.fx)
	}
}

package delivery

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/duraton/duraton/flowctl/expr"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// Wait conditions (docs/protocol.md, "Expressions, correlated waits, cancelOn"): a wait may
// carry a CEL condition over `event` (the waiting run's triggering event) and `async` (the
// incoming one). A condition that requires "async.<path> == event.<path>" (the match form, or
// an && chain with it) is indexed by the run's value at path, so an event finds those waiters
// without evaluating others (the rest of the chain is then evaluated for them alone); any
// other condition is evaluated for each incoming event of its name.

// ErrWaitCondition is a wait condition that does not compile (the server answers 400).
var ErrWaitCondition = errors.New("invalid wait condition")

// The variables of a wait condition.
const (
	condEvent = "event"
	condAsync = "async"
)

var matchForm = regexp.MustCompile(`^\s*async\.(` + expr.PathPattern + `)\s*==\s*event\.(` + expr.PathPattern + `)\s*$`)

// matchPath returns the path of a condition of the match form.
func matchPath(cond string) (string, bool) {
	m := matchForm.FindStringSubmatch(cond)
	if m == nil || m[1] != m[2] {
		return "", false
	}
	return m[1], true
}

// CompileWaitCondition checks a wait condition: it must compile over event and async and
// may be a bool. The error is ErrWaitCondition with CEL's message.
func (e *Engine) CompileWaitCondition(cond string) error {
	_, err := e.waitProgram(cond)
	return err
}

func (e *Engine) waitProgram(cond string) (*expr.Program, error) {
	p, err := e.exprs.Compile(cond, condEvent, condAsync)
	if err == nil {
		err = p.CheckBool()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: expression %q: %v", ErrWaitCondition, wire.HeaderWaitIf, cond, err)
	}
	return p, nil
}

// conditionTx fills a waiter's condition: its match (path and the run's value there)
// or, for any other condition, the run's triggering event.
func (e *Engine) conditionTx(tx *storage.Tx, project, runID, cond string, w *Waiter) error {
	p, err := e.waitProgram(cond)
	if err != nil {
		return err
	}
	ev, err := runEventTx(tx, project, runID)
	if err != nil {
		return err
	}
	w.If = cond
	if path, ok := p.EqualityConjunct(condAsync, condEvent); ok {
		w.Match = &storage.WaitMatch{Path: path}
		vars, err := expr.FromJSON(ev)
		if err != nil {
			return err
		}
		if v, ok := expr.Lookup(vars, path); ok {
			w.Match.Value = expr.Quoted(v)
		}
		if _, pure := matchPath(cond); !pure {
			w.Event = ev // the rest of the condition is evaluated for the indexed waiters
		}
		return nil
	}
	w.Event = ev
	return nil
}

// runEventTx is a run's triggering event as JSON {id, name, data, ts}: a native run's
// first event, or for any other run its trigger body as the data of an unnamed event.
func runEventTx(tx *storage.Tx, project, runID string) (json.RawMessage, error) {
	h, err := tx.History(project, runID, 1)
	if err != nil {
		return nil, err
	}
	run, err := tx.Run(project, runID)
	if err != nil {
		return nil, err
	}
	var body []byte
	if len(h) > 0 {
		body = h[0].Body
	}
	var p struct {
		ID     *string         `json:"id"`
		Name   *string         `json:"name"`
		Data   json.RawMessage `json:"data"`
		Ts     *int64          `json:"ts"`
		Events json.RawMessage `json:"events"`
	}
	if json.Unmarshal(body, &p) == nil && p.ID != nil && p.Name != nil && p.Ts != nil && p.Events != nil {
		return json.Marshal(map[string]any{"id": *p.ID, "name": *p.Name, "data": p.Data, "ts": *p.Ts})
	}
	data := json.RawMessage("null")
	if json.Valid(body) && len(body) > 0 {
		data = body
	} else if len(body) > 0 {
		data, _ = json.Marshal(string(body))
	}
	return json.Marshal(map[string]any{"id": "", "name": "", "data": data, "ts": run.CreatedAt})
}

// IncomingEvent is an event as a wait condition's `async` sees it.
type IncomingEvent struct {
	ID, Name string
	Data     json.RawMessage
	Ts       int64
}

func (in IncomingEvent) vars() map[string]any {
	data, err := expr.FromJSON(in.Data)
	if err != nil {
		data = string(in.Data) // /v2/notify takes any body
	}
	return map[string]any{"id": in.ID, "name": in.Name, "data": data, "ts": in.Ts}
}

// wakeableTx lists the waiters of eventID the incoming event wakes, up to limit: every
// plain waiter, the match waiters whose value it has, and the `if` waiters whose
// condition holds for it. more reports that further waiters would have woken.
func (e *Engine) wakeableTx(tx *storage.Tx, project, eventID string, in IncomingEvent, limit int) (ws []Waiter, more bool, err error) {
	if ws, err = tx.Waiters(project, eventID, limit+1, 0); err != nil {
		return nil, false, err
	}
	if len(ws) > limit {
		return ws[:limit], true, nil
	}
	var async map[string]any
	paths, err := tx.MatchPaths(project, eventID)
	if err != nil {
		return nil, false, err
	}
	for _, path := range paths {
		if async == nil {
			async = in.vars()
		}
		v, ok := expr.Lookup(async, path)
		if !ok {
			continue
		}
		got, err := tx.MatchWaiters(project, eventID, path, expr.Quoted(v), limit+1-len(ws))
		if err != nil {
			return nil, false, err
		}
		for _, w := range got {
			if len(w.Event) > 0 && !e.holds(w.If, w.Event, async) {
				continue
			}
			if ws = append(ws, w); len(ws) > limit {
				return ws[:limit], true, nil
			}
		}
	}
	var ifErr error
	err = tx.IfWaiters(project, eventID, func(w *storage.IfWaiter) bool {
		if async == nil {
			async = in.vars()
		}
		if !e.holds(w.If, w.Event, async) {
			return true
		}
		if len(ws) == limit {
			more = true
			return false
		}
		full, err := tx.Waiter(project, eventID, w.RunID)
		if err != nil {
			ifErr = err
			return false
		}
		ws = append(ws, *full)
		return true
	})
	if err == nil {
		err = ifErr
	}
	return ws, more, err
}

// holds evaluates an `if` condition for the run event (JSON) and the incoming event: an
// evaluation error (a missing field, a cost over the limit) is false.
func (e *Engine) holds(cond string, runEvent []byte, async map[string]any) bool {
	p, err := e.waitProgram(cond)
	if err != nil {
		return false
	}
	ev, err := e.runEvents.decode(runEvent)
	if err != nil {
		return false
	}
	ok, err := p.Bool(map[string]any{condEvent: ev, condAsync: async})
	return err == nil && ok
}

// waiterHolds reports whether a waiter's condition (if any) holds for the incoming event.
func (e *Engine) waiterHolds(w *Waiter, in IncomingEvent) bool {
	switch {
	case w.Match != nil:
		async := in.vars()
		v, ok := expr.Lookup(async, w.Match.Path)
		return ok && w.Match.Value != "" && expr.Quoted(v) == w.Match.Value &&
			(len(w.Event) == 0 || e.holds(w.If, w.Event, async))
	case w.If != "":
		return e.holds(w.If, w.Event, in.vars())
	}
	return true
}

// eventCache keeps run events decoded: every event of a name evaluates the `if`
// condition of each waiter of that name against its run's event, which does not change
// while the run waits. Keyed by the JSON text; emptied when full. Decoded values are
// only read (CEL does not change its inputs).
type eventCache struct {
	mu    sync.Mutex
	bytes int
	m     map[string]any
}

// maxCachedEventBytes bounds the eventCache (the JSON texts it holds; their decoded
// values take a few times more).
const maxCachedEventBytes = 16 << 20

func (c *eventCache) decode(raw []byte) (any, error) {
	c.mu.Lock()
	v, ok := c.m[string(raw)]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := expr.FromJSON(raw)
	if err != nil {
		return nil, err
	}
	if len(raw) > maxCachedEventBytes/64 {
		return v, nil // a large event is decoded each time rather than crowd out the rest
	}
	c.mu.Lock()
	if c.m == nil || c.bytes+len(raw) > maxCachedEventBytes {
		c.m, c.bytes = map[string]any{}, 0
	}
	c.m[string(raw)] = v
	c.bytes += len(raw)
	c.mu.Unlock()
	return v, nil
}

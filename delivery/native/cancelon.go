package native

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/flowctl/expr"
	"github.com/duraton/duraton/storage"
)

// cancelOn (docs/protocol.md, "Expressions, correlated waits, cancelOn"): an accepted event
// cancels, in the same transaction, the live runs (queued, running, sleeping, waiting) of
// every workflow whose cancelOn names it and whose triggering event it matches. Each run of
// such a workflow is indexed when it starts (storage/cancelon.go), by its value at each
// entry's match path, so an event reads only the runs its own value names.

// cancelOn limits.
const (
	MaxCancelOn = 8
	// MaxCancelsPerEvent bounds the runs one event cancels per workflow entry; further
	// matching runs stay live (send the event again to cancel the next ones).
	MaxCancelsPerEvent = 1000
	maxCancelTimeoutMs = 365 * 24 * 60 * 60 * 1000
)

var cancelMatchPath = regexp.MustCompile(`^` + expr.PathPattern + `$`)

// Condition variables of cancelOn's `if`: the run's triggering event and the incoming one.
const (
	condEvent = "event"
	condAsync = "async"
)

// EventCancel is what one workflow's cancelOn did with an event.
type EventCancel = storage.EventCancel

// parseCancelOn reads a definition's cancelOn field; errors name the field.
func (s *Service) parseCancelOn(raw json.RawMessage) ([]CancelOn, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, &flowctl.FieldError{Field: "cancelOn", Msg: fmt.Sprintf("want an array of at most %d {\"event\", \"match\"?, \"if\"?, \"timeoutMs\"?} objects", MaxCancelOn)}
	}
	if len(items) > MaxCancelOn {
		return nil, &flowctl.FieldError{Field: "cancelOn", Msg: fmt.Sprintf("at most %d entries, got %d", MaxCancelOn, len(items))}
	}
	out := make([]CancelOn, len(items))
	for i, it := range items {
		f := fmt.Sprintf("cancelOn[%d]", i)
		c := &out[i]
		if err := flowctl.DecodeStrict(f, it, []string{"event", "match", "if", "timeoutMs"}, c); err != nil {
			return nil, err
		}
		if err := checkEventName(c.Event); err != nil {
			return nil, &flowctl.FieldError{Field: f + ".event", Msg: err.Error()}
		}
		if c.Match != "" && (len(c.Match) > flowctl.MaxKeyPathLen || !cancelMatchPath.MatchString(c.Match)) {
			return nil, &flowctl.FieldError{Field: f + ".match", Msg: fmt.Sprintf("want a dotted path of identifiers such as \"data.orderId\" (at most %d bytes), got %q", flowctl.MaxKeyPathLen, c.Match)}
		}
		if c.If != "" {
			p, err := s.exprs.Compile(c.If, condEvent, condAsync)
			if err == nil {
				err = p.CheckBool()
			}
			if err != nil {
				return nil, exprFieldError(f+".if", c.If, err)
			}
		}
		if c.TimeoutMs < 0 || c.TimeoutMs > maxCancelTimeoutMs {
			return nil, &flowctl.FieldError{Field: f + ".timeoutMs", Msg: fmt.Sprintf("must be between 1 and %d ms (365 days), got %d", int64(maxCancelTimeoutMs), c.TimeoutMs)}
		}
	}
	return out, nil
}

// indexCancelTx indexes a new run of d for cancelOn and returns its records' keys (nil
// when d has no cancelOn). An entry with a match whose path the event lacks cannot
// cancel the run and is not indexed.
func (s *Service) indexCancelTx(tx *storage.Tx, project string, d *Workflow, runID string, ev payloadEvent, now int64) ([]string, error) {
	if len(d.CancelOn) == 0 {
		return nil, nil
	}
	k := newKeyEvent(ev)
	vars, err := k.values()
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, c := range d.CancelOn {
		value := ""
		if c.Match != "" {
			v, ok := expr.Lookup(vars[eventVar], c.Match)
			if !ok {
				continue
			}
			value = expr.Quoted(v)
		}
		e := &storage.CancelEntry{CreatedAt: now}
		if c.If != "" {
			if e.Event, err = json.Marshal(vars[eventVar]); err != nil {
				return nil, err
			}
		}
		key := storage.CancelPrefix(d.Name, c, value) + runID
		if err := tx.PutCancelEntry(project, key, e); err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// cancelTx applies every cancelOn naming the event: it cancels the matching live runs
// and returns, per workflow that cancelled any, their ids.
func (s *Service) cancelTx(n *delivery.NativeTx, project string, ev payloadEvent) ([]EventCancel, error) {
	defs, err := n.Tx.CancelledOn(project, ev.Name)
	if err != nil || len(defs) == 0 {
		return nil, err
	}
	async, err := newKeyEvent(ev).values()
	if err != nil {
		return nil, err
	}
	now := n.Now.UnixMilli()
	var out []EventCancel
	for i := range defs {
		d := &defs[i]
		seen := map[string]bool{}
		var ids []string
		for _, c := range d.CancelOn {
			if c.Event != ev.Name {
				continue
			}
			value := ""
			if c.Match != "" {
				v, ok := expr.Lookup(async[eventVar], c.Match)
				if !ok {
					continue
				}
				value = expr.Quoted(v)
			}
			var runs []string
			err := n.Tx.CancelEntries(project, storage.CancelPrefix(d.Name, c, value), func(runID string, e *storage.CancelEntry) bool {
				if seen[runID] || (c.TimeoutMs > 0 && now > e.CreatedAt+c.TimeoutMs) || !s.cancelHolds(c.If, e.Event, async[eventVar]) {
					return true
				}
				runs = append(runs, runID)
				return len(runs) < MaxCancelsPerEvent
			})
			if err != nil {
				return nil, err
			}
			for _, id := range runs {
				seen[id] = true
				live, err := n.CancelRun(project, id, delivery.CancelledBy{EventID: ev.ID})
				if err != nil {
					return nil, fmt.Errorf("workflow %q: cancel run %q: %w", d.Name, id, err)
				}
				if live {
					ids = append(ids, id)
				}
			}
		}
		if len(ids) > 0 {
			out = append(out, EventCancel{Workflow: d.Name, Cancelled: ids})
		}
	}
	return out, nil
}

// cancelHolds evaluates an entry's `if` (true when it has none); an evaluation error is
// false.
func (s *Service) cancelHolds(cond string, runEvent json.RawMessage, async any) bool {
	if cond == "" {
		return true
	}
	p, err := s.exprs.Compile(cond, condEvent, condAsync)
	if err != nil {
		return false
	}
	ev, err := expr.FromJSON(runEvent)
	if err != nil {
		return false
	}
	ok, err := p.Bool(map[string]any{condEvent: ev, condAsync: async})
	return err == nil && ok
}

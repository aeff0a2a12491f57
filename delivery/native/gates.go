package native

import (
	"errors"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage"
)

// The admission gates an event passes for one matching workflow, in the order of
// docs/protocol.md ("Controls"): idempotency, then rateLimit. Admission is two-phase:
// every gate is checked first and only an event that passes them all writes their states
// (a duplicate consumes no rate, a dropped event does not anchor an idempotency window).
//
// The gates after these are in buffers.go (debounce, batch, singleton, throttle). Not
// built yet: concurrency, project ceiling and priority (every delivery).

// gateState is the stored state of one gate scope (swept by the engine once expired).
type gateState = storage.GateState

// gatePrefix is the prefix of every gate state of a workflow.
func gatePrefix(workflow string) string { return workflow + "\x00" }

// gateKey names the state of one gate scope: the workflow, the gate and the resolved key
// value ("" for the whole-workflow scope; a resolved value is never empty).
func gateKey(workflow, gate, value string) string {
	return gatePrefix(workflow) + gate + "\x00" + value
}

// verdict is what the gates decided for one event and workflow.
type verdict struct {
	deduped, dropped bool
	writes           map[string]gateState // the states to store when the event is admitted
}

// admit checks the workflow's gates for an event at now (keyOf resolves a control's key
// for it). It writes nothing.
func admit(tx *storage.Tx, project string, d *Workflow, keyOf func(key string) string, now time.Time) (verdict, error) {
	v := verdict{writes: map[string]gateState{}}
	fc := &d.FlowControl
	if g := fc.Idempotency; g != nil {
		key := gateKey(d.Name, "idempotency", keyOf(g.Key))
		st, err := readGate(tx, project, key)
		if err != nil {
			return v, err
		}
		if st != nil && now.UnixMilli() < st.ExpiresAt {
			v.deduped = true
			return v, nil
		}
		v.writes[key] = gateState{ExpiresAt: now.UnixMilli() + g.PeriodMs}
	}
	if g := fc.RateLimit; g != nil {
		key := gateKey(d.Name, "rateLimit", keyOf(g.Key))
		st, err := readGate(tx, project, key)
		if err != nil {
			return v, err
		}
		var cur flowctl.GCRA
		if st != nil {
			cur = st.GCRA
		}
		next, ok, _ := cur.Allow(g.Limit, time.Duration(g.PerMs)*time.Millisecond, now)
		if !ok {
			v.dropped = true
			return v, nil
		}
		v.writes[key] = gateState{GCRA: next, ExpiresAt: time.Unix(0, next.TAT).UnixMilli() + 1}
	}
	return v, nil
}

// commit stores the states of an admitted event's gates.
func (v verdict) commit(tx *storage.Tx, project string) error {
	for k, st := range v.writes {
		if err := tx.PutGate(project, k, &st); err != nil {
			return err
		}
	}
	return nil
}

func readGate(tx *storage.Tx, project, key string) (*gateState, error) {
	st, err := tx.Gate(project, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return st, err
}

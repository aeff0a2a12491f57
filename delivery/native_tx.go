package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/storage"
)

// NativeTx is one write transaction of the native-workflow unit (delivery/native): its own
// records through Tx, and the runs it starts and the waiters it wakes, all in the same
// transaction, so an event, the runs it starts and the waiters it resumes are durable
// together (or not at all).
//
// Like every transaction function, the function given to NativeUpdate may run more than
// once: a NativeTx lives for one run of it and is discarded with that run.
type NativeTx struct {
	Tx  *storage.Tx
	Now time.Time

	e       *Engine
	fx      effects
	pubs    []Publication
	results []PublishResult
}

// ErrNativeQueue refuses a native run publication that names a queue (native runs are
// admitted by their workflow's controls, not by a queue).
var ErrNativeQueue = errors.New("delivery: a native run cannot name a queue")

// StartRun stores a run-creating publication: p.Message with Project, URL, RunID and the
// request fields filled as for PublishAll, p.Init set. The result is Deduplicated when a
// live run has that id (nothing is stored).
func (n *NativeTx) StartRun(p Publication) (PublishResult, error) {
	if p.Init == nil || p.Message.RunID == "" {
		return PublishResult{}, fmt.Errorf("delivery: StartRun needs a run id and a RunInit")
	}
	if p.Message.Queue != "" {
		return PublishResult{}, ErrNativeQueue
	}
	m := *p.Message
	prepare(&m, n.e.ids.New(storage.PrefixMessage, n.Now), n.Now)
	res := PublishResult{MessageID: m.ID, URL: m.URL}
	stored, err := n.e.hooks.attach(n.Tx, &m, p.Init, n.Now)
	if err != nil {
		return PublishResult{}, err
	}
	if !stored {
		res.Deduplicated = true
	} else {
		if err := putNew(n.Tx, &m, n.e.createdLog(&m, n.Now)); err != nil {
			return PublishResult{}, err
		}
		n.fx.add = append(n.fx.add, storage.DueWith(&m))
	}
	n.pubs = append(n.pubs, Publication{Message: &m, Init: p.Init})
	n.results = append(n.results, res)
	return res, nil
}

// Notify wakes every waiter of eventID (up to the engine's notify limit) with data, as
// Engine.Notify does without a run id, and returns how many runs it resumed.
func (n *NativeTx) Notify(project, eventID string, data []byte) (int, error) {
	return n.NotifyEvent(project, IncomingEvent{Name: eventID, Data: data, Ts: n.Now.UnixMilli()})
}

// NotifyEvent wakes the waiters of the event's name that it satisfies (every plain
// waiter, the match and if waiters whose condition holds for it), up to the engine's
// notify limit, with its data; it returns how many runs it resumed.
func (n *NativeTx) NotifyEvent(project string, in IncomingEvent) (int, error) {
	ws, _, err := n.e.waitersTx(n.Tx, project, in.Name, "", in)
	if err != nil {
		return 0, err
	}
	res, fx, err := n.e.resolveWaitersTx(n.Tx, project, ws, in.Data, n.Now)
	if err != nil {
		return 0, err
	}
	n.fx.merge(fx)
	return len(res), nil
}

// CancelRun cancels a live run inside the transaction (a singleton's holder, replaced by
// the run the same transaction starts). It reports whether the run was live.
func (n *NativeTx) CancelRun(project, runID string) (bool, error) {
	return n.CancelRunBy(project, runID, "")
}

// CancelRunBy is CancelRun for a workflow's cancelOn: the run records eventID as what
// cancelled it ("" for none).
func (n *NativeTx) CancelRunBy(project, runID, eventID string) (bool, error) {
	run, err := n.Tx.Run(project, runID)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil || !run.Live() {
		return false, err
	}
	if eventID != "" {
		run.CancelledBy = &storage.CancelledBy{EventID: eventID}
	}
	fx, err := n.e.wf.endRunTx(n.Tx, project, run, RunCanceled, "", n.Now)
	if err != nil {
		return false, err
	}
	n.fx.merge(fx)
	return true, nil
}

// NativeUpdate runs fn in one group-committed write transaction (see update) and, once it
// is durable, schedules what the committed run of fn started and resumed. It returns
// what that run of fn returned.
func NativeUpdate[T any](ctx context.Context, e *Engine, fn func(n *NativeTx) (T, error)) (T, error) {
	type out struct {
		v T
		n *NativeTx
	}
	now := e.now()
	res, err := update(ctx, e.store, func(tx *storage.Tx) (out, error) {
		n := &NativeTx{Tx: tx, Now: now, e: e}
		v, err := fn(n)
		return out{v: v, n: n}, err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	e.disp.apply(res.n.fx)
	e.observeRunsEnded(res.n.fx)
	if len(res.n.pubs) > 0 {
		e.observePublished(res.n.pubs, res.n.results)
	}
	return res.v, nil
}

// sweepNativeTx removes a project's native events older than retention (they are kept as
// long as logs) and its expired gate states, up to limit of each.
func sweepNativeTx(tx *storage.Tx, project string, now time.Time, retention time.Duration, limit int) (int, error) {
	a, err := tx.DeleteEventsBefore(project, storage.IDAt(storage.PrefixEvent, now.Add(-retention)), limit)
	if err != nil {
		return 0, err
	}
	b, err := tx.DeleteExpiredGates(project, now.UnixMilli(), limit)
	return a + b, err
}

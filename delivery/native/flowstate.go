package native

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/storage"
)

// maxStateScan bounds the records one GET /flow-state or GET /runs/stats reads; past
// it the answer says truncated.
const maxStateScan = 100_000

// RunStats counts a project's native runs (GET /runs/stats: docs/protocol.md, "Native
// workflows"): active runs are not yet terminal; running ones have a delivery in flight;
// queued ones have a delivery due and waiting for admission. Truncated when more than
// maxStateScan live runs exist.
type RunStats struct {
	Active    int  `json:"active"`
	Queued    int  `json:"queued"`
	Running   int  `json:"running"`
	Truncated bool `json:"truncated,omitempty"`
}

// Stats counts the project's live native runs by activity.
func (s *Service) Stats(ctx context.Context, project string) (*RunStats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ids []string
	truncated := false
	err := s.store.View(func(tx *storage.Tx) error {
		ids, truncated = nil, false
		return tx.ForEachRun(project, func(r *storage.Run) bool {
			if wf, _ := nativeOf(r); wf == "" || !r.Live() {
				return true
			}
			if len(ids) == maxStateScan {
				truncated = true
				return false
			}
			ids = append(ids, r.ID)
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	acts, err := s.engine.RunActivities(ctx, project, ids)
	if err != nil {
		return nil, err
	}
	st := &RunStats{Active: len(acts), Truncated: truncated}
	for _, a := range acts {
		switch a.Activity {
		case StatusQueued:
			st.Queued++
		case StatusRunning:
			st.Running++
		}
	}
	return st, nil
}

// FlowState is GET /flow-state: the workflows' gate backlogs and states and the project
// ceiling. Debounce and batch list the workflows with a backlog.
type FlowState struct {
	Debounce    []DebounceState    `json:"debounce"`
	Batch       []BatchState       `json:"batch"`
	RateLimit   []RateLimitState   `json:"rateLimit"`
	Idempotency []IdempotencyState `json:"idempotency"`
	Concurrency ConcurrencyState   `json:"concurrency"`
	// TokenThrottle lists the tokenThrottle buckets (tokens.go).
	TokenThrottle []TokenThrottleState `json:"tokenThrottle"`
	Truncated     bool                 `json:"truncated,omitempty"`
}

// DebounceState is one workflow's debounce backlog (GET /flow-state: docs/protocol.md,
// "Native workflows"): the keys with a debounce waiting to fire and the earliest
// deadline.
type DebounceState struct {
	App        string `json:"app"`
	Workflow   string `json:"workflow"`
	Pending    int    `json:"pending"`
	NextFireAt string `json:"nextFireAt"`
}

// BatchState is one workflow's batch backlog: the events held in its batches and the
// time the oldest was received.
type BatchState struct {
	App      string `json:"app"`
	Workflow string `json:"workflow"`
	Buffered int    `json:"buffered"`
	OldestAt string `json:"oldestAt"`
}

// RateLimitState is one workflow's rateLimit: the key scopes with recent admissions,
// those admitting nothing now (an event would be dropped) and when the first of those
// admits again.
type RateLimitState struct {
	App           string `json:"app"`
	Workflow      string `json:"workflow"`
	Keys          int    `json:"keys"`
	Limited       int    `json:"limited"`
	NextAllowedAt string `json:"nextAllowedAt,omitempty"`
}

// IdempotencyState is one workflow's idempotency: the key values whose window is open
// (a matching event would be deduplicated) and when the first of them closes.
type IdempotencyState struct {
	App         string `json:"app"`
	Workflow    string `json:"workflow"`
	Keys        int    `json:"keys"`
	NextCloseAt string `json:"nextCloseAt,omitempty"`
}

// ConcurrencyState is the project ceiling (0: unlimited) and its deliveries in flight.
type ConcurrencyState struct {
	Limit int `json:"limit"`
	InUse int `json:"inUse"`
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// FlowState reads the gate states of the project's workflows (of app, or the one named
// workflow, when set; an unknown one is ErrNotFound).
func (s *Service) FlowState(ctx context.Context, project, app, workflow string) (*FlowState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.engine.Now()
	out := &FlowState{Debounce: []DebounceState{}, Batch: []BatchState{}, RateLimit: []RateLimitState{}, Idempotency: []IdempotencyState{}}
	err := s.store.View(func(tx *storage.Tx) error {
		out.Debounce, out.Batch, out.RateLimit, out.Idempotency, out.Truncated = []DebounceState{}, []BatchState{}, []RateLimitState{}, []IdempotencyState{}, false
		out.TokenThrottle = []TokenThrottleState{}
		defs, err := s.selectDefs(tx, project, app, workflow)
		if err != nil {
			return err
		}
		budget := maxStateScan
		scan := func(d *Workflow, gate string, fn func(st *storage.GateState)) error {
			n := 0
			trunc, err := tx.ForEachGate(project, gatePrefix(d.Name)+gate+"\x00", budget, func(_ string, st *storage.GateState) bool {
				n++
				fn(st)
				return true
			})
			budget -= n
			out.Truncated = out.Truncated || trunc || budget <= 0
			return err
		}
		scanBuffers := func(d *Workflow, gate string, fn func(b *storage.GateBuffer)) error {
			n := 0
			trunc, err := tx.ForEachGateBuffer(project, gateKey(d.Name, gate, ""), budget, func(b *storage.GateBuffer) {
				n++
				fn(b)
			})
			budget -= n
			out.Truncated = out.Truncated || trunc || budget <= 0
			return err
		}
		for i := range defs {
			d := &defs[i]
			if d.FlowControl.TokenThrottle != nil && budget > 0 { // tokens.go
				n := 0
				trunc, err := tx.ForEachGate(project, gateKey(d.Name, gateTokens, ""), budget, func(key string, st *storage.GateState) bool {
					n++
					out.TokenThrottle = append(out.TokenThrottle, tokenState(d, key, st, now))
					return true
				})
				budget -= n
				out.Truncated = out.Truncated || trunc || budget <= 0
				if err != nil {
					return err
				}
			}
			if d.FlowControl.Debounce != nil && budget > 0 {
				ds := DebounceState{App: d.App, Workflow: d.Name}
				var next int64
				err := scanBuffers(d, gateDebounce, func(b *storage.GateBuffer) {
					ds.Pending++
					if next == 0 || b.Deadline < next {
						next = b.Deadline
					}
				})
				if err != nil {
					return err
				}
				if ds.Pending > 0 {
					ds.NextFireAt = rfc3339(time.UnixMilli(next))
					out.Debounce = append(out.Debounce, ds)
				}
			}
			if d.FlowControl.Batch != nil && budget > 0 {
				bs := BatchState{App: d.App, Workflow: d.Name}
				var oldest int64
				err := scanBuffers(d, gateBatch, func(b *storage.GateBuffer) {
					bs.Buffered += len(b.Events)
					if len(b.Events) > 0 && (oldest == 0 || b.Events[0].Ts < oldest) {
						oldest = b.Events[0].Ts
					}
				})
				if err != nil {
					return err
				}
				if bs.Buffered > 0 {
					bs.OldestAt = rfc3339(time.UnixMilli(oldest))
					out.Batch = append(out.Batch, bs)
				}
			}
			if g := d.FlowControl.RateLimit; g != nil && budget > 0 {
				rs := RateLimitState{App: d.App, Workflow: d.Name}
				var next time.Time
				err := scan(d, "rateLimit", func(st *storage.GateState) {
					if st.GCRA.Idle(now) {
						return
					}
					rs.Keys++
					if _, ok, at := st.GCRA.Allow(g.Limit, time.Duration(g.PerMs)*time.Millisecond, now); !ok {
						rs.Limited++
						if next.IsZero() || at.Before(next) {
							next = at
						}
					}
				})
				if err != nil {
					return err
				}
				if !next.IsZero() {
					rs.NextAllowedAt = rfc3339(next)
				}
				out.RateLimit = append(out.RateLimit, rs)
			}
			if d.FlowControl.Idempotency != nil && budget > 0 {
				is := IdempotencyState{App: d.App, Workflow: d.Name}
				var next int64
				err := scan(d, "idempotency", func(st *storage.GateState) {
					if st.ExpiresAt <= now.UnixMilli() {
						return
					}
					is.Keys++
					if next == 0 || st.ExpiresAt < next {
						next = st.ExpiresAt
					}
				})
				if err != nil {
					return err
				}
				if next != 0 {
					is.NextCloseAt = rfc3339(time.UnixMilli(next))
				}
				out.Idempotency = append(out.Idempotency, is)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Concurrency.Limit, out.Concurrency.InUse = s.engine.GlobalParallelism(project)
	return out, nil
}

// selectDefs reads the definitions a flow-state read covers.
func (s *Service) selectDefs(tx *storage.Tx, project, app, workflow string) ([]Workflow, error) {
	if workflow != "" {
		d, err := tx.WorkflowDef(project, workflow)
		if errors.Is(err, storage.ErrNotFound) || (err == nil && app != "" && d.App != app) {
			return nil, fmt.Errorf("workflow %q: %w", workflow, ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		return []Workflow{*d}, nil
	}
	if app != "" {
		if _, err := tx.App(project, app); errors.Is(err, storage.ErrNotFound) {
			return nil, fmt.Errorf("app %q: %w", app, ErrNotFound)
		} else if err != nil {
			return nil, err
		}
	}
	all, err := tx.WorkflowDefs(project)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, d := range all {
		if app == "" || d.App == app {
			out = append(out, d)
		}
	}
	return out, nil
}

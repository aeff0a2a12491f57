package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// Run statuses of a native run (docs/protocol.md, "Native workflows").
const (
	StatusQueued    = delivery.ActivityQueued
	StatusRunning   = delivery.ActivityRunning
	StatusSleeping  = delivery.ActivitySleeping
	StatusWaiting   = delivery.ActivityWaiting
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// IsStatus reports whether s names a run status.
func IsStatus(s string) bool {
	switch s {
	case StatusQueued, StatusRunning, StatusSleeping, StatusWaiting, StatusSucceeded, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// ErrRunEnded refuses to cancel a run that already ended (409).
var ErrRunEnded = errors.New("run already ended")

// RunStep is one recorded step of a run.
type RunStep struct {
	ID      int             `json:"id"`
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	Status  string          `json:"status"`
	EndedAt int64           `json:"endedAt"`
	Out     json.RawMessage `json:"out,omitempty"`
	// Usage is an AI step's model, tokens and cost.
	Usage *flowctl.AIUsage `json:"usage,omitempty"`
}

// RunWaiting says why a live run is not running.
type RunWaiting struct {
	Reason string `json:"reason"`
	Since  int64  `json:"since"`
}

// RunView is a native run as GET /runs and GET /runs/{id} show it. Times are unix ms.
type RunView struct {
	RunID     string            `json:"runId"`
	Workflow  string            `json:"workflow"`
	App       string            `json:"app"`
	Status    string            `json:"status"`
	CreatedAt int64             `json:"createdAt"`
	StartedAt int64             `json:"startedAt,omitempty"`
	EndedAt   int64             `json:"endedAt,omitempty"`
	EventIDs  []string          `json:"eventIds"`
	Keys      map[string]RunKey `json:"keys"`
	Steps     []RunStep         `json:"steps,omitempty"`
	DLQID     string            `json:"dlqId,omitempty"`
	Waiting   *RunWaiting       `json:"waiting,omitempty"`
	// Usage is what the run's AI steps spent; Cap the run's AI cap in force.
	Usage *flowctl.AIUsage `json:"usage,omitempty"`
	Cap   *flowctl.Cap     `json:"cap,omitempty"`
	// CancelledBy names the event whose workflow's cancelOn cancelled the run.
	CancelledBy *storage.CancelledBy `json:"cancelledBy,omitempty"`
}

// RunKey is one keyed control of a run as resolved when the run was created: its key
// path and either Scope "key" with the resolved Value (a JSON scalar: "a1", 1, true) or
// Scope "workflow" (the whole-workflow scope: no path, or the path named a missing field,
// an object, an array or null). A key expression shows Expr instead of Path, its Value
// as the key's text (a JSON string) or null, and Error when it had no value.
type RunKey struct {
	Path  string          `json:"path,omitempty"`
	Expr  string          `json:"expr,omitempty"`
	Scope string          `json:"scope"`
	Value json.RawMessage `json:"value,omitempty"`
	Error string          `json:"error,omitempty"`
}

// Scopes of a RunKey.
const (
	ScopeKey      = "key"
	ScopeWorkflow = "workflow"
)

// runKeys shows a run's resolved keys by control name.
func runKeys(keys []flowctl.RunKey) map[string]RunKey {
	out := make(map[string]RunKey, len(keys))
	for _, k := range keys {
		v := RunKey{Path: k.Path, Scope: ScopeWorkflow}
		if k.Expr {
			v = RunKey{Expr: k.Path, Scope: ScopeWorkflow, Value: json.RawMessage("null"), Error: k.Error}
			if !k.WholeWorkflow() {
				text, _ := json.Marshal(k.Value)
				v.Scope, v.Value = ScopeKey, text
			}
			out[k.Control] = v
			continue
		}
		if !k.WholeWorkflow() {
			v.Scope, v.Value = ScopeKey, json.RawMessage(k.Value)
		}
		out[k.Control] = v
	}
	return out
}

// RunFilter selects runs of GET /runs; empty fields select everything.
type RunFilter struct {
	Workflow, App, Status string
}

// nativeOf returns the workflow and app a run was started for ("" for a run that is
// not a native workflow's).
func nativeOf(r *delivery.Run) (workflow, app string) {
	if v := r.Header[wire.HeaderDuratonWorkflow]; len(v) == 1 {
		workflow = v[0]
	}
	if v := r.Header[wire.HeaderDuratonApp]; len(v) == 1 {
		app = v[0]
	}
	return workflow, app
}

func (f RunFilter) keep(r *delivery.Run) bool {
	wf, app := nativeOf(r)
	if wf == "" || (f.Workflow != "" && wf != f.Workflow) || (f.App != "" && app != f.App) {
		return false
	}
	switch f.Status {
	case "":
		return true
	case StatusSucceeded:
		return r.State == storage.RunSuccess
	case StatusFailed:
		return r.State == storage.RunFailed
	case StatusCancelled:
		return r.State == storage.RunCanceled
	}
	return r.Live() // a live status: decided by the run's activity
}

// maxRunPages bounds the pages one GET /runs with a live status reads to fill its page.
const maxRunPages = 10

// Runs lists native runs newest first, limit per page, after the cursor (nil: from the
// newest), and returns the next page's cursor (nil at the end). With a live status the
// page may hold fewer than limit runs while a cursor is returned: follow it.
func (s *Service) Runs(ctx context.Context, project string, f RunFilter, after *delivery.RunCursor, limit int) ([]RunView, *delivery.RunCursor, error) {
	var out []RunView
	for page := 0; page < maxRunPages; page++ {
		runs, next, err := s.engine.Runs(ctx, project, after, limit-len(out), f.keep)
		if err != nil {
			return nil, nil, err
		}
		views, err := s.views(ctx, project, runs, false)
		if err != nil {
			return nil, nil, err
		}
		for _, v := range views {
			if f.Status == "" || v.Status == f.Status {
				out = append(out, v)
			}
		}
		if next == nil || len(out) == limit {
			return out, next, nil
		}
		after = next
	}
	return out, after, nil
}

// Run reads one native run with its steps.
func (s *Service) Run(ctx context.Context, project, id string) (*RunView, error) {
	r, err := s.engine.Run(ctx, project, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if wf, _ := nativeOf(&r.Run); wf == "" {
		return nil, fmt.Errorf("run %q is not a native workflow's run: %w", id, ErrNotFound)
	}
	views, err := s.views(ctx, project, []delivery.RunWithHistory{*r}, true)
	if err != nil {
		return nil, err
	}
	return &views[0], nil
}

// CancelRun cancels a live native run and returns it as it is after the cancel.
func (s *Service) CancelRun(ctx context.Context, project, id string) (*RunView, error) {
	if _, err := s.Run(ctx, project, id); err != nil {
		return nil, err // unknown, or not a native run
	}
	live, err := s.engine.CancelRun(ctx, project, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if !live {
		after, rerr := s.Run(ctx, project, id)
		if rerr != nil {
			return nil, rerr
		}
		return nil, fmt.Errorf("%w: run %q is %s", ErrRunEnded, id, after.Status)
	}
	return s.Run(ctx, project, id)
}

// ReplayRun re-runs a failed native run from its failed step, its history kept: the
// delivery that failed it is taken out of the DLQ and sent again with a fresh retry
// budget (POST /runs/{id}/replay). A run that did not fail is a conflict.
func (s *Service) ReplayRun(ctx context.Context, project, id string) (*RunView, error) {
	return s.ReplayRunCap(ctx, project, id, nil)
}

// ReplayRunCap is ReplayRun with the run's AI cap replaced by cp (nil: kept), durably
// with the resumption: a run stopped by its cap resumes at the AI step that crossed it.
func (s *Service) ReplayRunCap(ctx context.Context, project, id string, cp *flowctl.Cap) (*RunView, error) {
	r, err := s.engine.Run(ctx, project, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("run %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if wf, _ := nativeOf(&r.Run); wf == "" {
		return nil, fmt.Errorf("run %q is not a native workflow's run: %w", id, ErrNotFound)
	}
	if r.State != delivery.RunFailed {
		return nil, fmt.Errorf("%w: run %q is %s, only a failed run is replayed", ErrConflict, id, r.State)
	}
	if r.DLQID == "" {
		return nil, fmt.Errorf("%w: run %q has no dead letter to replay from", ErrConflict, id)
	}
	resumed, err := s.engine.ReplayRunWithCap(ctx, project, r.DLQID, cp)
	if err != nil {
		return nil, err
	}
	if len(resumed) == 0 {
		return nil, fmt.Errorf("%w: run %q: its dead letter is gone (deleted, or replayed meanwhile)", ErrConflict, id)
	}
	return s.Run(ctx, project, id)
}

// views turns runs into their views, the live ones' status read from the engine.
func (s *Service) views(ctx context.Context, project string, runs []delivery.RunWithHistory, steps bool) ([]RunView, error) {
	var live []string
	for i := range runs {
		if runs[i].Live() {
			live = append(live, runs[i].ID)
		}
	}
	acts, err := s.engine.RunActivities(ctx, project, live)
	if err != nil {
		return nil, err
	}
	out := make([]RunView, len(runs))
	for i := range runs {
		r := &runs[i]
		wf, app := nativeOf(&r.Run)
		v := RunView{RunID: r.ID, Workflow: wf, App: app, CreatedAt: r.CreatedAt, EndedAt: r.EndedAt,
			EventIDs: []string{}, Keys: runKeys(r.FlowKeys), DLQID: r.DLQID, Usage: r.AIUsage, Cap: r.AICap,
			CancelledBy: r.CancelledBy}
		all := recordedSteps(r.History)
		if len(all) > 0 {
			v.StartedAt = all[0].EndedAt
		}
		if steps {
			v.Steps = all
			if v.Steps == nil {
				v.Steps = []RunStep{}
			}
		}
		if len(r.History) > 0 {
			v.EventIDs = eventIDs(r.History[0].Body)
		}
		switch r.State {
		case storage.RunSuccess:
			v.Status = StatusSucceeded
		case storage.RunFailed:
			v.Status = StatusFailed
		case storage.RunCanceled:
			v.Status = StatusCancelled
		default:
			a, ok := acts[r.ID]
			if !ok { // ended between the two reads
				a = delivery.RunActivity{Activity: StatusRunning}
			}
			v.Status = a.Activity
			if a.Reason != "" {
				v.Waiting = &RunWaiting{Reason: a.Reason, Since: a.Since.UnixMilli()}
			}
		}
		out[i] = v
	}
	return out, nil
}

// recordedSteps are a run's step results in the order recorded (the initial payload,
// plan steps and call bookkeeping left out).
func recordedSteps(history []delivery.HistoryEntry) []RunStep {
	var out []RunStep
	ai := map[int]*flowctl.AIUsage{} // AI usage by step id, from the calls' callbacks
	for _, e := range history {
		if e.AI != nil && e.AI.StepID > 0 {
			u := *e.AI
			u.StepID = 0
			ai[e.AI.StepID] = &u
		}
	}
	for i, e := range history {
		if i == 0 || e.CallType != delivery.CallStep {
			continue
		}
		var st struct {
			StepID   int             `json:"stepId"`
			StepName string          `json:"stepName"`
			StepType string          `json:"stepType"`
			Out      json.RawMessage `json:"out"`
		}
		if err := json.Unmarshal(e.Body, &st); err != nil || st.StepID == 0 {
			continue
		}
		out = append(out, RunStep{ID: st.StepID, Name: st.StepName, Type: st.StepType, Status: StatusSucceeded, EndedAt: e.CreatedAt, Out: st.Out, Usage: ai[st.StepID]})
	}
	return out
}

// eventIDs reads the ids of the events a run was started with from its initial payload.
func eventIDs(body []byte) []string {
	var p struct {
		Events []struct {
			ID string `json:"id"`
		} `json:"events"`
	}
	out := []string{}
	if json.Unmarshal(body, &p) != nil {
		return out
	}
	for _, e := range p.Events {
		if e.ID != "" {
			out = append(out, e.ID)
		}
	}
	return out
}

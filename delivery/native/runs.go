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

// RunStep is one recorded step of a run, or the step that failed it.
type RunStep struct {
	ID        int    `json:"id"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	StartedAt int64  `json:"startedAt"`
	EndedAt   int64  `json:"endedAt"`
	// Out is the step's value as JSON (views.go).
	Out json.RawMessage `json:"out,omitempty"`
	// Error says why the step failed its run.
	Error *StepError `json:"error,omitempty"`
	// Usage is an AI step's model, tokens and cost.
	Usage *flowctl.AIUsage `json:"usage,omitempty"`
}

// StepError is why a step failed: the run error's code and message, and the last HTTP
// status its endpoint answered.
type StepError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Status  int    `json:"status,omitempty"`
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
	Steps     []RunStep         `json:"steps"`
	DLQID     string            `json:"dlqId,omitempty"`
	Waiting   *RunWaiting       `json:"waiting,omitempty"`
	// Error says why a failed run failed (codes: storage.ErrCode*), CancelledBy who
	// cancelled a cancelled run.
	Error       *delivery.RunError    `json:"error,omitempty"`
	CancelledBy *delivery.CancelledBy `json:"cancelledBy,omitempty"`
	// Usage is what the run's AI steps spent; Cap the run's AI cap in force.
	Usage *flowctl.AIUsage `json:"usage,omitempty"`
	Cap   *flowctl.Cap     `json:"cap,omitempty"`
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

// nativeOf returns the workflow and app a run was started for ("" for a run that is
// not a native workflow's). Runs stored before Run.Workflow have them in their header.
func nativeOf(r *delivery.Run) (workflow, app string) {
	if r.Workflow != "" {
		return r.Workflow, r.App
	}
	if v := r.Header[wire.HeaderDuratonWorkflow]; len(v) == 1 {
		workflow = v[0]
	}
	if v := r.Header[wire.HeaderDuratonApp]; len(v) == 1 {
		app = v[0]
	}
	return workflow, app
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
	views, err := s.views(ctx, project, []delivery.RunWithHistory{*r})
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

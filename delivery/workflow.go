package delivery

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/sdk/wire"
	"github.com/duraton/duraton/storage"
)

// Workflow run errors. ErrRunEnded answers 400, which the workflow SDK reads as "stop
// quietly" (docs/protocol.md, "Steps").
var (
	ErrRunEnded    = errors.New("workflow run has ended")
	ErrRunNotFound = fmt.Errorf("workflow run %w", storage.ErrNotFound)
	// ErrRunLimit is a run beyond one of the engine's limits (history size, steps, invoke
	// depth); the server answers 412, which the SDK turns into a non-retryable error.
	ErrRunLimit = errors.New("workflow run limit")
)

// Run-related records, re-exported.
type (
	Run          = storage.Run
	HistoryEntry = storage.HistoryEntry
	Waiter       = storage.Waiter
	ParentLink   = storage.ParentLink
)

// Run states and call types, re-exported.
const (
	RunStarted       = storage.RunStarted
	RunSuccess       = storage.RunSuccess
	RunFailed        = storage.RunFailed
	RunCanceled      = storage.RunCanceled
	CallStep         = storage.CallStep
	CallToCallback   = storage.CallToCallback
	CallFromCallback = storage.CallFromCallback
	CallFailure      = storage.CallFailure
)

// RunInit is what a run-creating message (Upstash-Workflow-Init: true) brings beyond the
// message itself.
type RunInit struct {
	// URL is the run's workflow URL (Upstash-Workflow-Url; default the destination).
	URL string
	// DetectTrigger makes a first delivery whose answer lacks Upstash-Workflow-Sdk-Version
	// fail the run (feature WF_DetectTrigger).
	DetectTrigger bool
	// Parent links a run started by context.invoke to its invoker.
	Parent *ParentLink
	// InvokeDepth is the invoke count of the child (Upstash-Workflow-Invoke-Count).
	InvokeDepth int
	// UnknownSdk marks a run triggered through /v2/trigger: its first delivery carries
	// Upstash-Workflow-Unknown-Sdk, and the run waits for its SDK to adopt it.
	UnknownSdk bool
	// TriggerBySDK marks the SDK's answer to that delivery (upstash-workflow-trigger-by-sdk):
	// an init for a run that waits to be adopted continues it instead of being a
	// duplicate (adoptRunTx).
	TriggerBySDK bool
	// PriorityShiftMs is a native workflow's priority: the run's deliveries wait as if
	// it had been created this much earlier.
	PriorityShiftMs int64
	// FlowKeys are a native run's keyed controls as resolved at creation (shown on
	// GET /runs/{id}).
	FlowKeys []flowctl.RunKey
	// Cap is a native workflow's AI spend cap, checked before each AI step of the run.
	Cap *flowctl.Cap
	// CancelKeys are the run's records in its workflow's cancelOn index, written by the
	// caller in the same transaction and removed when the run ends.
	CancelKeys []string
	// StartKeyOnly: the message's flow control gates the run's first delivery only (a
	// tokenThrottle's waitlist); the run's later deliveries have none.
	StartKeyOnly bool
}

// Publication is one message to publish. A message with RunID set belongs to a workflow
// run; Init is set when it creates the run.
type Publication struct {
	Message *Message
	Init    *RunInit
}

// isWorkflowDelivery reports whether a message is delivered to a run's workflow URL (and
// so carries the run's configuration and can fail the run).
func isWorkflowDelivery(m *Message) bool {
	return m.RunID != "" && m.Kind != storage.KindWaitTimeout && (m.CallType == CallStep || m.CallType == CallFromCallback)
}

// createRunTx creates (or, for an ended run with the same id, replaces) the run that m
// starts. It returns false when a live run with that id exists: the message is then a
// duplicate trigger and is not stored.
func (w *runs) createRunTx(tx *storage.Tx, m *Message, init *RunInit, now time.Time) (bool, error) {
	if old, err := tx.Run(m.Project, m.RunID); err == nil {
		if old.Live() && old.AwaitingSDK && init.TriggerBySDK {
			return true, w.adoptRunTx(tx, old, m, now)
		}
		if old.Live() {
			return false, nil
		}
		// Reusing the id of an ended run is allowed: the old run is replaced.
		if err := tx.DeleteRun(m.Project, old); err != nil {
			return false, err
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return false, err
	}
	if init.InvokeDepth > w.limits.MaxInvokeDepth {
		return false, fmt.Errorf("%w: invoke depth %d exceeds %d", ErrRunLimit, init.InvokeDepth, w.limits.MaxInvokeDepth)
	}
	url := init.URL
	if url == "" {
		url = m.URL
	}
	run := &Run{
		ID: m.RunID, URL: url, CreatedAt: now.UnixMilli(), OrderNs: w.order.next(now), State: RunStarted,
		Retries: m.Retries, RetryDelay: m.RetryDelay, TimeoutMs: m.TimeoutMs, Labels: m.Labels,
		Header: userHeaders(m.Header), CallerIP: m.CallerIP, FailureCallback: m.FailureCallback,
		FlowControl: m.FlowControl, FlowExtra: m.FlowExtra, Parent: init.Parent, InvokeDepth: init.InvokeDepth, PriorityShiftMs: init.PriorityShiftMs,
		FlowKeys: init.FlowKeys, CancelKeys: init.CancelKeys,
		AICap: init.Cap, TokenGate: m.TokenGate,
		AwaitingSDK: init.UnknownSdk,
	}
	if init.StartKeyOnly {
		run.FlowControl = nil
	}
	if err := tx.IndexRun(m.Project, run); err != nil {
		return false, err
	}
	if err := tx.PutRun(m.Project, run); err != nil {
		return false, err
	}
	m.CallType = CallStep
	m.DetectTrigger = init.DetectTrigger
	if init.UnknownSdk {
		m.Header = withHeader(m.Header, wire.HeaderWorkflowUnknownSdk, "true")
	}
	return true, w.appendStepTx(tx, run, m, now)
}

// adoptRunTx continues a run triggered without an SDK (docs/protocol.md, "Starting a
// run": POST /v2/trigger) with the init its endpoint's SDK re-published: m becomes the
// run's next delivery, of the history the trigger recorded (m's body, the same payload,
// is not recorded again). The run keeps what the trigger's caller set (retries, delay,
// timeout, headers) and takes from the SDK what only the route knows: its failure
// callback, flow control and labels, where the trigger set none. A second re-trigger (a
// redelivery of the first delivery) is then a duplicate, as the run no longer waits.
func (w *runs) adoptRunTx(tx *storage.Tx, run *Run, m *Message, now time.Time) error {
	run.AwaitingSDK = false
	if run.FailureCallback == nil {
		run.FailureCallback = m.FailureCallback
	}
	if run.FlowControl == nil && len(run.FlowExtra) == 0 {
		run.FlowControl, run.FlowExtra = m.FlowControl, m.FlowExtra
	}
	if len(run.Labels) == 0 {
		run.Labels = m.Labels
	}
	if err := tx.PutRun(m.Project, run); err != nil {
		return err
	}
	m.CallType = CallStep
	m.HistoryLen = run.HistoryLen
	m.FlowControl, m.FlowExtra = nil, nil // the run's, set by applyRun
	applyRun(m, run)
	return tx.LinkRunMessage(m.Project, run.ID, m.ID)
}

// userHeaders keeps the trigger's forwarded headers that every delivery of the run
// repeats: the user's own, not the SDK's Upstash-Workflow-* ones nor the content type.
func userHeaders(h map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range h {
		if strings.HasPrefix(k, wire.PrefixWorkflow) || k == "Content-Type" {
			continue
		}
		out[k] = v
	}
	return out
}

func withHeader(h map[string][]string, name, value string) map[string][]string {
	out := make(map[string][]string, len(h)+1)
	for k, v := range h {
		out[k] = v
	}
	out[name] = []string{value}
	return out
}

// continueRunTx attaches a non-init message to its live run.
func (w *runs) continueRunTx(tx *storage.Tx, m *Message, now time.Time) error {
	run, err := tx.Run(m.Project, m.RunID)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrRunNotFound, m.RunID)
	}
	if err != nil {
		return err
	}
	if !run.Live() {
		return fmt.Errorf("%w: run %q is %s", ErrRunEnded, run.ID, run.State)
	}
	if m.CallType == "" {
		m.CallType = CallStep
	}
	return w.appendStepTx(tx, run, m, now)
}

// errDuplicateStep marks a step whose result is already in the run's history.
var errDuplicateStep = errors.New("step already recorded")

// stepKey identifies a step result in a run: its stepId, or for a plan step its
// targetStep. "" for bodies that are not step objects (the initial payload).
func stepKey(body []byte) string {
	var s struct {
		StepID     *int `json:"stepId"`
		TargetStep *int `json:"targetStep"`
	}
	if json.Unmarshal(body, &s) != nil || s.StepID == nil {
		return ""
	}
	if *s.StepID == 0 && s.TargetStep != nil {
		return "plan:" + strconv.Itoa(*s.TargetStep)
	}
	return "step:" + strconv.Itoa(*s.StepID)
}

// appendStepTx appends m's entry to the run's history, binds m to the run and gives a
// delivery to the workflow URL the run's configuration and headers.
//
// A step whose result is already recorded (the SDK published it again after a
// redelivery) is not appended: errDuplicateStep. So every step is recorded exactly once
// although deliveries are at least once (docs/guarantees.md, "Exactly-once step recording").
func (w *runs) appendStepTx(tx *storage.Tx, run *Run, m *Message, now time.Time) error {
	if m.CallType == CallStep && run.HistoryLen > 0 {
		if key := stepKey(m.Body); key != "" {
			if _, dup := tx.StepMessage(m.Project, run.ID, key); dup {
				return errDuplicateStep
			}
			if err := tx.PutStepKey(m.Project, run.ID, key, m.ID); err != nil {
				return err
			}
		}
	}
	if m.CallType == CallStep {
		if err := mintWebhookTx(tx, run, m, now); err != nil { // webhooks.go
			return err
		}
	}
	if m.CallType == CallToCallback {
		markAICall(m) // ai.go
	}
	entry := &HistoryEntry{MessageID: m.ID, Body: m.Body, CallType: m.CallType, CreatedAt: now.UnixMilli(), AI: m.AIUsage}
	if err := w.appendHistoryTx(tx, m.Project, run, entry); err != nil {
		return err
	}
	if m.CallType == CallStep {
		m.HistoryLen = run.HistoryLen // up to and including its own entry
		applyRun(m, run)
	}
	// Only the cursor changes: the run's record is not rewritten on every step.
	if err := tx.PutRunCursor(m.Project, run); err != nil {
		return err
	}
	return tx.LinkRunMessage(m.Project, run.ID, m.ID)
}

// appendHistoryTx adds one entry to a run's history within the run's limits. The caller
// writes the run record.
func (w *runs) appendHistoryTx(tx *storage.Tx, project string, run *Run, entry *HistoryEntry) error {
	if run.HistoryLen >= w.limits.MaxRunSteps {
		return fmt.Errorf("%w: run %q has %d history entries, the limit is %d", ErrRunLimit, run.ID, run.HistoryLen, w.limits.MaxRunSteps)
	}
	if run.HistoryBytes+int64(len(entry.Body)) > w.limits.MaxRunHistoryBytes {
		return fmt.Errorf("%w: run %q history would exceed %d bytes", ErrRunLimit, run.ID, w.limits.MaxRunHistoryBytes)
	}
	if err := tx.PutHistory(project, run.ID, run.HistoryLen, entry); err != nil {
		return err
	}
	run.HistoryLen++
	run.HistoryBytes += int64(len(entry.Body))
	return nil
}

// applyRun gives a delivery to the workflow URL the run's configuration (retries, retry
// delay, timeout, failure callback, flow control: WF_TriggerOnConfig) and the headers
// every workflow delivery carries.
//
// A step message that brings its own flow control keeps it: that is Duraton's per-step
// override (docs/protocol.md, "Per-step flow control"), which gates the step under its
// own key only.
func applyRun(m *Message, run *Run) {
	m.Retries, m.RetryDelay, m.FailureCallback = run.Retries, run.RetryDelay, run.FailureCallback
	if m.FlowControl == nil {
		m.FlowControl, m.FlowExtra = run.FlowControl, run.FlowExtra
	}
	m.OrderAt, m.PriorityShiftMs = run.OrderAt(), run.PriorityShiftMs
	if run.TimeoutMs > 0 && m.TimeoutMs == 0 {
		m.TimeoutMs = run.TimeoutMs
	}
	m.Labels = run.Labels
	m.Header = runHeaders(m.Header, run)
}

// runHeaders adds the run's user headers (the message's own win) and the run's identity.
func runHeaders(own map[string][]string, run *Run) map[string][]string {
	h := make(map[string][]string, len(own)+len(run.Header)+4)
	for k, v := range run.Header {
		h[k] = v
	}
	for k, v := range own {
		h[k] = v
	}
	h[wire.HeaderWorkflowRunID] = []string{run.ID}
	h[wire.HeaderWorkflowURL] = []string{run.URL}
	h[wire.HeaderWorkflowCreatedAt] = []string{strconv.FormatInt(run.CreatedAt, 10)}
	if len(run.Labels) > 0 {
		h[wire.HeaderLabel] = []string{strings.Join(run.Labels, ",")}
	}
	return h
}

// historyBody encodes a history prefix as the delivery body of docs/protocol.md,
// "Workflow runs".
func historyBody(entries []HistoryEntry) []byte {
	out := make([]wire.HistoryEntry, len(entries))
	for i, e := range entries {
		out[i] = wire.HistoryEntry{MessageID: e.MessageID, Body: nonNil(e.Body), CallType: e.CallType}
	}
	return wire.MustCompactJSON(out)
}

// answeredBySDK reports whether a workflow endpoint's answer carries the protocol header
// (feature WF_DetectTrigger).
func answeredBySDK(h http.Header) bool { return h.Get(wire.HeaderWorkflowSdkVersion) != "" }

// stepWith returns the step object raw with extra fields set (out, waitTimeout, ...),
// keeping every field the SDK sent.
func stepWith(raw []byte, fields map[string]any) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("step object: %w", err)
		}
	}
	for k, v := range fields {
		if v == nil {
			delete(obj, k)
			continue
		}
		obj[k] = wire.MustCompactJSON(v)
	}
	return wire.MustCompactJSON(obj), nil
}

// nonNil makes an empty body encode as "" rather than null: the SDK base64-decodes the
// field with atob, which would read null as the text "null".
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

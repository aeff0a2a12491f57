package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/duraton/duraton/flowctl"
	"github.com/duraton/duraton/storage/kv"
)

// Run states, stored by name (the Upstash Workflow names).
const (
	RunStarted  = "RUN_STARTED"
	RunSuccess  = "RUN_SUCCESS"
	RunFailed   = "RUN_FAILED"
	RunCanceled = "RUN_CANCELED"
)

// History call types.
const (
	CallStep         = "step"
	CallToCallback   = "toCallback"
	CallFromCallback = "fromCallback"
	CallFailure      = "failureCall"
)

// Run is one workflow run: its configuration, taken from the trigger and applied to every
// later message of the run (WF_TriggerOnConfig), and its state. The history lives in its
// own bucket, one record per entry.
type Run struct {
	ID        string `json:"id"`
	URL       string `json:"url"`
	CreatedAt int64  `json:"createdAt"`
	EndedAt   int64  `json:"endedAt,omitempty"`
	State     string `json:"state"`
	Response  []byte `json:"response,omitempty"`
	HasResp   bool   `json:"hasResponse,omitempty"`
	// HistoryLen and HistoryBytes are kept in the run's own cursor record next to its
	// history (see PutRunCursor), so appending a step does not rewrite this record.
	HistoryLen   int                 `json:"-"`
	HistoryBytes int64               `json:"-"`
	Retries      int                 `json:"retries"`
	RetryDelay   string              `json:"retryDelay,omitempty"`
	TimeoutMs    int64               `json:"timeoutMs,omitempty"`
	Labels       []string            `json:"labels,omitempty"`
	Header       map[string][]string `json:"header,omitempty"` // the user's forward headers
	CallerIP     string              `json:"callerIp,omitempty"`
	// FailureCallback is the trigger's failure callback, applied to every workflow delivery.
	FailureCallback *CallbackSpec `json:"failureCallback,omitempty"`
	// FlowControl is the run's flow-control configuration.
	FlowControl *flowctl.Config `json:"flowControl,omitempty"`
	// FlowExtra are the run's further flow-control keys (Message.FlowExtra).
	FlowExtra []flowctl.Config `json:"flowExtra,omitempty"`
	// OrderNs is the run's creation time in unix ns, unique per engine, so runs created
	// in the same millisecond keep their creation order in waitlists.
	OrderNs int64 `json:"orderNs,omitempty"`
	// PriorityShiftMs orders the run's deliveries in their waitlists as if the run had
	// been created this much earlier (a native workflow's priority).
	PriorityShiftMs int64 `json:"priorityShiftMs,omitempty"`
	// FlowKeys are a native run's keyed controls as resolved when it was created.
	FlowKeys []flowctl.RunKey `json:"flowKeys,omitempty"`
	// DLQID names the dead letter of the delivery that failed the run.
	DLQID string `json:"dlqId,omitempty"`
	// Parent is set on a run started by context.invoke: how to resume the invoker.
	Parent *ParentLink `json:"parent,omitempty"`
	// InvokeDepth counts invocations from the root run.
	InvokeDepth int `json:"invokeDepth,omitempty"`
	// FailureMessageID is the failure callback message, once one was published.
	FailureMessageID string `json:"failureMessageId,omitempty"`
	FailureState     string `json:"failureState,omitempty"`
	// AICap bounds the run's AI spend (its workflow's cap, raised by a replay); AIUsage
	// is what its AI steps spent so far (docs/protocol.md, "AI steps and spend controls").
	AICap   *flowctl.Cap     `json:"aiCap,omitempty"`
	AIUsage *flowctl.AIUsage `json:"aiUsage,omitempty"`
	// TokenGate is the run's tokenThrottle bucket (its AI usage is debited from it);
	// TokenStarted marks a run whose start passed the gate, TokenReserved what that start
	// reserved (given back when the run ends).
	TokenGate     *TokenGate `json:"tokenGate,omitempty"`
	TokenStarted  bool       `json:"tokenStarted,omitempty"`
	TokenReserved int64      `json:"tokenReserved,omitempty"`
	// AwaitingSDK marks a run triggered without an SDK (POST /v2/trigger) whose
	// endpoint's SDK has not yet re-published its init (docs/protocol.md, "Starting
	// a run").
	AwaitingSDK bool `json:"awaitingSdk,omitempty"`
	// Workflow, App and EventName name a native run's workflow definition, its app and
	// the event that started it (indexed for search; runsearch.go). A run stored before
	// them has them empty (its workflow and app are still in Header).
	Workflow  string `json:"workflow,omitempty"`
	App       string `json:"app,omitempty"`
	EventName string `json:"eventName,omitempty"`
	// Error says why a failed run failed; CancelledBy who cancelled a cancelled run.
	Error       *RunError    `json:"error,omitempty"`
	CancelledBy *CancelledBy `json:"cancelledBy,omitempty"`
	// CancelKeys are the run's records in its workflow's cancelOn index (cancelon.go),
	// removed when it ends.
	CancelKeys []string `json:"cancelKeys,omitempty"`
}

// Stable codes of a RunError.
const (
	ErrCodeBudgetExceeded   = "budget_exceeded"
	ErrCodeRetriesExhausted = "retries_exhausted"
	ErrCodeNonRetryable     = "non_retryable"
	ErrCodeTimeout          = "timeout"
	ErrCodeInvokeFailed     = "invoke_failed"
	ErrCodeInternal         = "internal"
)

// RunError is why a run failed: a stable code, a message, the step that failed (when
// known) and the last HTTP status the endpoint answered (when it answered).
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Step    string `json:"step,omitempty"`
	Status  int    `json:"status,omitempty"`
}

// CancelledBy is who cancelled a run: an event (a workflow's cancelOn), the singleton
// run that replaced it, or a call of the API. Exactly one field is set.
type CancelledBy struct {
	EventID   string `json:"eventId,omitempty"`
	Singleton string `json:"singleton,omitempty"`
	API       bool   `json:"api,omitempty"`
}

// Live reports whether the run has not ended.
func (r *Run) Live() bool { return r.State == RunStarted }

// OrderAt is where the run's deliveries stand in a waitlist: its creation time, shifted
// earlier by its priority.
func (r *Run) OrderAt() int64 {
	created := r.OrderNs
	if created == 0 { // a run stored before OrderNs existed
		created = r.CreatedAt * int64(time.Millisecond)
	}
	return created - r.PriorityShiftMs*int64(time.Millisecond)
}

// ParentLink is what a child run needs to resume its invoker: a publish-style message
// template (the invoke envelope's headers, parsed) and the invoke step to complete.
type ParentLink struct {
	RunID     string   `json:"runId"`
	URL       string   `json:"url"`
	CreatedAt int64    `json:"createdAt"`
	Template  *Message `json:"template"`
	Step      []byte   `json:"step"` // the envelope's step object, raw JSON
}

// HistoryEntry is one element of a run's history (docs/protocol.md, "Workflow runs").
type HistoryEntry struct {
	MessageID string `json:"messageId"`
	Body      []byte `json:"body"`
	CallType  string `json:"callType"`
	CreatedAt int64  `json:"createdAt"`
	// AI is the usage of the AI call whose callback this entry records.
	AI *flowctl.AIUsage `json:"ai,omitempty"`
}

const (
	bucketRuns     = "runs"
	bucketWaiters  = "waiters"
	bucketLookback = "lookback"
	// bucketRunData holds everything a run accumulates, under keys that start with the
	// run id, so one run's writes of a step land on the same page: its history
	// (id 0x00 'h' seq), its step keys (id 0x00 's' key), its pending messages
	// (id 0x00 'm' message id) and its cursor (id 0x00 'c': history length and bytes).
	bucketRunData = "rundata"
)

func runDataPrefix(runID string, kind byte) []byte {
	k := make([]byte, 0, len(runID)+2+32)
	return append(append(append(k, runID...), 0), kind)
}

func historyKey(runID string, seq int) []byte {
	return binary.BigEndian.AppendUint64(runDataPrefix(runID, 'h'), uint64(seq))
}

// deletePrefix removes every key of b that starts with prefix.
func deletePrefix(b kv.Bucket, prefix []byte) error {
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// PutRun writes a run, its cursor included.
func (t *Tx) PutRun(project string, r *Run) error {
	b, err := t.writeBucket(project, bucketRuns)
	if err != nil {
		return err
	}
	data, err := encodeRun(r) // runcodec.go
	if err != nil {
		return err
	}
	if err := b.Put([]byte(r.ID), data); err != nil {
		return err
	}
	if err := t.indexEndedRun(project, r); err != nil { // sweep.go
		return err
	}
	return t.PutRunCursor(project, r)
}

// PutRunCursor writes only a run's history length and size.
func (t *Tx) PutRunCursor(project string, r *Run) error {
	t.noteRun(project, r.ID)
	b, err := t.writeBucket(project, bucketRunData)
	if err != nil {
		return err
	}
	v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(r.HistoryLen)), uint64(r.HistoryBytes))
	return b.Put(runDataPrefix(r.ID, 'c'), v)
}

// Run reads a run.
func (t *Tx) Run(project, id string) (*Run, error) {
	b := t.bucket(project, bucketRuns)
	if b == nil {
		return nil, ErrNotFound
	}
	data := b.Get([]byte(id))
	if data == nil {
		return nil, ErrNotFound
	}
	var r Run
	if err := decodeRun(data, &r); err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	if b := t.bucket(project, bucketRunData); b != nil {
		if v := b.Get(runDataPrefix(id, 'c')); len(v) == 16 {
			r.HistoryLen, r.HistoryBytes = int(binary.BigEndian.Uint64(v[:8])), int64(binary.BigEndian.Uint64(v[8:]))
		}
	}
	return &r, nil
}

// ForEachRunNewestFirst calls fn for runs in reverse id order until fn returns false.
// Run ids are chosen by clients, so this order is not creation order.
func (t *Tx) ForEachRun(project string, fn func(*Run) bool) error {
	b := t.bucket(project, bucketRuns)
	if b == nil {
		return nil
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var r Run
		if err := decodeRun(v, &r); err != nil {
			return fmt.Errorf("run %s: %w", k, err)
		}
		if !fn(&r) {
			return nil
		}
	}
	return nil
}

// PutHistory writes history entry seq of a run.
func (t *Tx) PutHistory(project, runID string, seq int, e *HistoryEntry) error {
	t.noteRun(project, runID)
	b, err := t.writeBucket(project, bucketRunData)
	if err != nil {
		return err
	}
	data, err := encodeHistory(e) // histcodec.go
	if err != nil {
		return err
	}
	return b.Put(historyKey(runID, seq), data)
}

// History reads the first n entries of a run's history.
func (t *Tx) History(project, runID string, n int) ([]HistoryEntry, error) {
	b := t.bucket(project, bucketRunData)
	if b == nil {
		return nil, ErrNotFound
	}
	out := make([]HistoryEntry, 0, n)
	err := t.EachHistory(project, runID, n, func(h HistoryView) error {
		// An empty body reads as empty, not nil (the delivery and the API show "").
		e := HistoryEntry{MessageID: string(h.MessageID), CallType: string(h.CallType), CreatedAt: h.CreatedAt,
			Body: append([]byte{}, h.Body...), AI: h.AI}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// HistoryEntry reads entry seq of a run's history.
func (t *Tx) HistoryEntry(project, runID string, seq int) (*HistoryEntry, error) {
	b := t.bucket(project, bucketRunData)
	if b == nil {
		return nil, ErrNotFound
	}
	v := b.Get(historyKey(runID, seq))
	if v == nil {
		return nil, ErrNotFound
	}
	h, err := viewHistory(v)
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", runID, err)
	}
	return &HistoryEntry{MessageID: string(h.MessageID), CallType: string(h.CallType), CreatedAt: h.CreatedAt,
		Body: append([]byte{}, h.Body...), AI: h.AI}, nil
}

// DeleteHistoryFrom removes a run's history entries from seq on.
func (t *Tx) DeleteHistoryFrom(project, runID string, seq int) error {
	b, err := t.writeBucket(project, bucketRunData)
	if err != nil {
		return err
	}
	prefix := runDataPrefix(runID, 'h')
	c := b.Cursor()
	for k, _ := c.Seek(historyKey(runID, seq)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(historyKey(runID, seq)) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// LinkRunMessage records that a pending message belongs to a run, so cancelling the run
// can find it.
func (t *Tx) LinkRunMessage(project, runID, messageID string) error {
	b, err := t.writeBucket(project, bucketRunData)
	if err != nil {
		return err
	}
	return b.Put(append(runDataPrefix(runID, 'm'), messageID...), nil)
}

// UnlinkRunMessage removes the link of a message that ended.
func (t *Tx) UnlinkRunMessage(project, runID, messageID string) error {
	b, err := t.writeBucket(project, bucketRunData)
	if err != nil {
		return err
	}
	return b.Delete(append(runDataPrefix(runID, 'm'), messageID...))
}

// RunMessages lists the ids of a run's pending messages.
func (t *Tx) RunMessages(project, runID string) ([]string, error) {
	b := t.bucket(project, bucketRunData)
	if b == nil {
		return nil, nil
	}
	var out []string
	prefix := runDataPrefix(runID, 'm')
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		out = append(out, string(k[len(prefix):]))
	}
	return out, nil
}

const bucketRunIndex = "runindex"

func runIndexKey(createdAt int64, runID string) []byte {
	k := make([]byte, 8+len(runID))
	binary.BigEndian.PutUint64(k, uint64(createdAt))
	copy(k[8:], runID)
	return k
}

// IndexRun adds a run to the by-creation-time index used for listing and to the search
// index (runsearch.go).
func (t *Tx) IndexRun(project string, r *Run) error {
	b, err := t.writeBucket(project, bucketRunIndex)
	if err != nil {
		return err
	}
	if err := b.Put(runIndexKey(r.CreatedAt, r.ID), nil); err != nil {
		return err
	}
	return t.indexRunTerms(project, r, true)
}

// UnindexRun removes a run from the listing and search indexes.
func (t *Tx) UnindexRun(project string, r *Run) error {
	b, err := t.writeBucket(project, bucketRunIndex)
	if err != nil {
		return err
	}
	if err := b.Delete(runIndexKey(r.CreatedAt, r.ID)); err != nil {
		return err
	}
	return t.indexRunTerms(project, r, false)
}

// RunCursor is a position in the run listing: created-at and run id of the last run seen.
type RunCursor struct {
	CreatedAt int64
	RunID     string
}

// ListRuns returns up to count runs newest first, after the cursor (nil: from the newest),
// that match keep, and the cursor of the last one when more may follow.
func (t *Tx) ListRuns(project string, after *RunCursor, count int, keep func(*Run) bool) ([]Run, *RunCursor, error) {
	b := t.bucket(project, bucketRunIndex)
	if b == nil {
		return nil, nil, nil
	}
	var out []Run
	var next *RunCursor
	c := b.Cursor()
	var k []byte
	if after == nil {
		k, _ = c.Last()
	} else {
		start := runIndexKey(after.CreatedAt, after.RunID)
		k, _ = c.Seek(start)
		if k == nil {
			k, _ = c.Last()
		}
		for k != nil && string(k) >= string(start) {
			k, _ = c.Prev()
		}
	}
	for ; k != nil; k, _ = c.Prev() {
		if len(out) == count {
			last := out[len(out)-1]
			next = &RunCursor{CreatedAt: last.CreatedAt, RunID: last.ID}
			break
		}
		r, err := t.Run(project, string(k[8:]))
		if err != nil {
			continue // index entry of a run being replaced in this transaction
		}
		if keep(r) {
			out = append(out, *r)
		}
	}
	return out, next, nil
}

// StepMessage returns the message that recorded a step key in a run's history.
func (t *Tx) StepMessage(project, runID, key string) (string, bool) {
	b := t.bucket(project, bucketRunData)
	if b == nil {
		return "", false
	}
	v := b.Get(append(runDataPrefix(runID, 's'), key...))
	return string(v), v != nil
}

// PutStepKey records that a step key of a run is in its history.
func (t *Tx) PutStepKey(project, runID, key, messageID string) error {
	b, err := t.writeBucket(project, bucketRunData)
	if err != nil {
		return err
	}
	return b.Put(append(runDataPrefix(runID, 's'), key...), []byte(messageID))
}

// DeleteStepKeys forgets every step key of a run (its history was reset).
func (t *Tx) DeleteStepKeys(project, runID string) error {
	b, err := t.writeBucket(project, bucketRunData)
	if err != nil {
		return err
	}
	return deletePrefix(b, runDataPrefix(runID, 's'))
}

// DeleteRun removes an ended run with its history, step keys and index entries.
func (t *Tx) DeleteRun(project string, r *Run) error {
	t.noteRun(project, r.ID)
	if err := t.UnindexRun(project, r); err != nil {
		return err
	}
	ended, err := t.writeBucket(project, bucketRunEnded)
	if err != nil {
		return err
	}
	if err := ended.Delete(timeKey(r.EndedAt, r.ID)); err != nil {
		return err
	}
	data, err := t.writeBucket(project, bucketRunData)
	if err != nil {
		return err
	}
	if err := deletePrefix(data, append([]byte(r.ID), 0)); err != nil {
		return err
	}
	b, err := t.writeBucket(project, bucketRuns)
	if err != nil {
		return err
	}
	return b.Delete([]byte(r.ID))
}

package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/duraton/duraton/flowctl"
)

// Native workflows (docs/protocol.md, "Native workflows"): apps, their workflow
// definitions, the index of the definitions each event name triggers, and the events sent
// to POST /events.
const (
	bucketApps        = "apps"
	bucketWorkflowDef = "wfdefs"
	bucketTriggers    = "wftriggers"
	bucketEvents      = "events"
	bucketGates       = "gates"

	// PrefixEvent is the prefix of event ids.
	PrefixEvent = "evt_"
	// eventDedupPrefix keys an event dedupeId in the dedup bucket, apart from message
	// deduplication ids (header values never hold a NUL) and swept with them.
	eventDedupPrefix = "\x00evt\x00"
)

// App is a named group of workflow definitions. Times are unix milliseconds.
type App struct {
	Name      string   `json:"name"`
	Workflows []string `json:"workflows"`
	CreatedAt int64    `json:"createdAt"`
	UpdatedAt int64    `json:"updatedAt"`
}

// Trigger starts a workflow: an event name, or a cron schedule (five fields, in the IANA
// zone TZ, UTC when empty) whose fires are events named CronEventName.
type Trigger struct {
	Event string `json:"event,omitempty"`
	Cron  string `json:"cron,omitempty"`
	TZ    string `json:"tz,omitempty"`
}

// CronEventName names the events of cron fires.
const CronEventName = "duraton/cron"

// WorkflowDef is a native workflow definition, normalized.
type WorkflowDef struct {
	App         string           `json:"app"`
	Name        string           `json:"name"`
	URL         string           `json:"url"`
	Triggers    []Trigger        `json:"triggers"`
	Retries     int              `json:"retries"`
	FlowControl flowctl.Controls `json:"flowControl"`
	CancelOn    []CancelOn       `json:"cancelOn,omitempty"` // cancelon.go
	CreatedAt   int64            `json:"createdAt"`
	UpdatedAt   int64            `json:"updatedAt"`
}

// EventRun is what one workflow did with an event; exactly one outcome is set besides
// Workflow.
type EventRun struct {
	Workflow    string `json:"workflow"`
	RunID       string `json:"runId,omitempty"`
	Dropped     bool   `json:"dropped,omitempty"`
	Deduped     bool   `json:"deduped,omitempty"`
	Skipped     bool   `json:"skipped,omitempty"`
	HolderRunID string `json:"holderRunId,omitempty"`
	Debounced   bool   `json:"debounced,omitempty"`
	Batched     bool   `json:"batched,omitempty"`
}

// Event is an event sent to POST /events, with what each matching workflow did with it.
// A delayed event has ScheduledFor (unix ms; Ts is then that time too) and is Pending
// until it fans out then.
type Event struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Data         json.RawMessage `json:"data"`
	DedupeID     string          `json:"dedupeId,omitempty"`
	Ts           int64           `json:"ts"`
	ScheduledFor int64           `json:"scheduledFor,omitempty"`
	Pending      bool            `json:"pending,omitempty"`
	Runs         []EventRun      `json:"runs"`
	// Cancelled are the runs the event cancelled, per workflow (cancelon.go).
	Cancelled []EventCancel `json:"cancelled,omitempty"`
}

// ---- apps and definitions

// PutApp creates or replaces an app record (its definitions are written separately).
func (t *Tx) PutApp(project string, a *App) error {
	return t.putRecord(project, bucketApps, a.Name, a)
}

// App reads an app.
func (t *Tx) App(project, name string) (*App, error) {
	return getRecord[App](t.bucket(project, bucketApps), name)
}

// DeleteApp removes an app record; ErrNotFound when absent.
func (t *Tx) DeleteApp(project, name string) error {
	return deleteRecord(t.bucket(project, bucketApps), name)
}

// AppCount is the number of a project's apps.
func (t *Tx) AppCount(project string) int {
	return countRecords(t.bucket(project, bucketApps))
}

// Apps lists a project's apps by name.
func (t *Tx) Apps(project string) ([]App, error) {
	return listRecords[App](t.bucket(project, bucketApps), "app")
}

func triggerKey(event, workflow string) []byte {
	return append(append([]byte(event), 0), workflow...)
}

// PutWorkflowDef creates or replaces a definition and indexes its triggers. A replaced
// definition's old triggers must be removed first (DeleteWorkflowDef).
func (t *Tx) PutWorkflowDef(project string, d *WorkflowDef) error {
	b, err := t.writeBucket(project, bucketWorkflowDef)
	if err != nil {
		return err
	}
	if err := put(b, d.Name, d); err != nil {
		return err
	}
	ix, err := t.writeBucket(project, bucketTriggers)
	if err != nil {
		return err
	}
	for _, tr := range d.Triggers {
		if tr.Event == "" {
			continue // a cron trigger: its fires are timers (native_timers.go)
		}
		if err := ix.Put(triggerKey(tr.Event, d.Name), []byte(d.App)); err != nil {
			return err
		}
	}
	return t.putCancelOnIndex(project, d)
}

// WorkflowDef reads a definition by workflow name.
func (t *Tx) WorkflowDef(project, name string) (*WorkflowDef, error) {
	var d WorkflowDef
	if err := get(t.bucket(project, bucketWorkflowDef), name, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// DeleteWorkflowDef removes a definition and its trigger index entries; ErrNotFound when
// absent.
func (t *Tx) DeleteWorkflowDef(project, name string) error {
	d, err := t.WorkflowDef(project, name)
	if err != nil {
		return err
	}
	if ix := t.bucket(project, bucketTriggers); ix != nil {
		for _, tr := range d.Triggers {
			if tr.Event == "" {
				continue
			}
			if err := ix.Delete(triggerKey(tr.Event, name)); err != nil {
				return err
			}
		}
	}
	if err := t.deleteCancelOnIndex(project, d); err != nil {
		return err
	}
	return t.bucket(project, bucketWorkflowDef).Delete([]byte(name))
}

// WorkflowDefs lists a project's definitions by name.
func (t *Tx) WorkflowDefs(project string) ([]WorkflowDef, error) {
	b := t.bucket(project, bucketWorkflowDef)
	if b == nil {
		return nil, nil
	}
	var out []WorkflowDef
	err := b.ForEach(func(k, v []byte) error {
		var d WorkflowDef
		if err := json.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("workflow %s: %w", k, err)
		}
		out = append(out, d)
		return nil
	})
	return out, err
}

// TriggeredBy lists the definitions an event name starts, by workflow name.
func (t *Tx) TriggeredBy(project, event string) ([]WorkflowDef, error) {
	return t.defsIndexedBy(project, bucketTriggers, "trigger", event)
}

// defsIndexedBy reads the definitions an index of event name 0x00 workflow name keys
// lists under event, by workflow name; what names the index in errors.
func (t *Tx) defsIndexedBy(project, bucket, what, event string) ([]WorkflowDef, error) {
	ix := t.bucket(project, bucket)
	if ix == nil {
		return nil, nil
	}
	prefix := append([]byte(event), 0)
	var out []WorkflowDef
	c := ix.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		d, err := t.WorkflowDef(project, string(k[len(prefix):]))
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, k, err)
		}
		out = append(out, *d)
	}
	return out, nil
}

// TriggerCount is how many definitions an event name starts (TriggeredBy's length,
// without reading them).
func (t *Tx) TriggerCount(project, event string) (int, error) {
	ix := t.bucket(project, bucketTriggers)
	if ix == nil {
		return 0, nil
	}
	prefix := append([]byte(event), 0)
	n := 0
	c := ix.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n, nil
}

// ---- events

// PutEvent stores an event.
func (t *Tx) PutEvent(project string, e *Event) error {
	b, err := t.writeBucket(project, bucketEvents)
	if err != nil {
		return err
	}
	return put(b, e.ID, e)
}

// Event reads an event.
func (t *Tx) Event(project, id string) (*Event, error) {
	var e Event
	if err := get(t.bucket(project, bucketEvents), id, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Events lists up to limit events newest first, starting at the id from (inclusive; the
// newest when empty), keeping those whose name matches (all when name is empty). It
// returns the cursor of the next page: the id of the first event not yet read ("" at the
// end). At most scan records are read, so a rare name cannot make one page read the
// whole bucket; the cursor then resumes where the scan stopped.
func (t *Tx) Events(project, name, from string, limit, scan int) ([]Event, string, error) {
	b := t.bucket(project, bucketEvents)
	if b == nil {
		return nil, "", nil
	}
	c := b.Cursor()
	var k, v []byte
	if from == "" {
		k, v = c.Last()
	} else {
		k, v = c.Seek([]byte(from))
		switch {
		case k == nil:
			k, v = c.Last()
		case string(k) != from:
			k, v = c.Prev()
		}
	}
	var out []Event
	read := 0
	for ; k != nil; k, v = c.Prev() {
		if len(out) == limit || read == scan {
			return out, string(k), nil
		}
		read++
		var e Event
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, "", fmt.Errorf("event %s: %w", k, err)
		}
		if name == "" || e.Name == name {
			out = append(out, e)
		}
	}
	return out, "", nil
}

// EventDedup reads the record of an event dedupeId (ErrNotFound when never seen).
func (t *Tx) EventDedup(project, dedupeID string) (*DedupRecord, error) {
	return t.Dedup(project, eventDedupPrefix+dedupeID)
}

// PutEventDedup records an event dedupeId; it expires with the message dedup records.
func (t *Tx) PutEventDedup(project, dedupeID string, r *DedupRecord) error {
	return t.PutDedup(project, eventDedupPrefix+dedupeID, r)
}

// ---- gate states

// GateState is the stored state of one admission gate scope of a native workflow.
// ExpiresAt (unix ms) is when it stops mattering (the end of an idempotency window, the
// time a GCRA scope is idle again): the sweeper removes it after that.
type GateState struct {
	ExpiresAt int64        `json:"expiresAt"`
	GCRA      flowctl.GCRA `json:"gcra,omitzero"`
	// RunID is a singleton scope's holder: the run last started in it. The record is
	// swept once that run has ended (DeleteExpiredGates).
	RunID string `json:"runId,omitempty"`
	// Runs and RunTokens are a tokenThrottle scope's ended runs and their AI tokens.
	Runs      int64 `json:"runs,omitempty"`
	RunTokens int64 `json:"runTokens,omitempty"`
}

// Gate reads the state of one gate scope; ErrNotFound when the scope has none.
func (t *Tx) Gate(project, key string) (*GateState, error) {
	var st GateState
	if err := get(t.bucket(project, bucketGates), key, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// PutGate stores the state of one gate scope.
func (t *Tx) PutGate(project, key string, st *GateState) error {
	b, err := t.writeBucket(project, bucketGates)
	if err != nil {
		return err
	}
	return put(b, key, st)
}

// BusyGCRAs returns the GCRA gate states of a project that are not idle at nowNs (their
// full burst is not back yet), by gate key: the start gates the scheduler must remember
// across a restart.
func (t *Tx) BusyGCRAs(project string, nowNs int64) (map[string]flowctl.GCRA, error) {
	out := map[string]flowctl.GCRA{}
	b := t.bucket(project, bucketGates)
	if b == nil {
		return out, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		var st GateState
		if err := json.Unmarshal(v, &st); err != nil {
			return fmt.Errorf("gate state %q: %w", k, err)
		}
		if st.GCRA.TAT > nowNs {
			out[string(k)] = st.GCRA
		}
		return nil
	})
	return out, err
}

// DeleteGatesWithPrefix removes every gate state whose key starts with prefix (a removed
// workflow's).
func (t *Tx) DeleteGatesWithPrefix(project, prefix string) error {
	b := t.bucket(project, bucketGates)
	if b == nil {
		return nil
	}
	c := b.Cursor()
	p := []byte(prefix)
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Seek(p) {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// DeleteExpiredGates removes up to limit gate states that expired before nowMs, and
// singleton holder records whose run has ended or is gone (they never expire by time: a
// holder matters exactly while its run is live, and without this one record per key
// value ever seen would stay until the workflow is removed).
func (t *Tx) DeleteExpiredGates(project string, nowMs int64, limit int) (int, error) {
	b := t.bucket(project, bucketGates)
	if b == nil {
		return 0, nil
	}
	var expired [][]byte
	err := b.ForEach(func(k, v []byte) error {
		if len(expired) >= limit {
			return nil
		}
		var st GateState
		if err := json.Unmarshal(v, &st); err != nil {
			return fmt.Errorf("gate state %q: %w", k, err)
		}
		gone := st.ExpiresAt < nowMs
		if !gone && st.RunID != "" {
			r, err := t.Run(project, st.RunID)
			switch {
			case errors.Is(err, ErrNotFound):
				gone = true
			case err != nil:
				return fmt.Errorf("gate state %q: holder run %q: %w", k, st.RunID, err)
			default:
				gone = !r.Live()
			}
		}
		if gone {
			expired = append(expired, append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range expired {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(expired), nil
}

// DeleteEventsBefore removes up to limit events whose id sorts before cutoff (IDAt of
// the retention's start). A delayed event still pending is kept (its id is as old as its
// acceptance, its fan-out may be months later): it goes once its record shows its runs.
func (t *Tx) DeleteEventsBefore(project, cutoff string, limit int) (int, error) {
	b := t.bucket(project, bucketEvents)
	if b == nil {
		return 0, nil
	}
	var old [][]byte
	c := b.Cursor()
	scanned := 0 // pending events skipped count too: a sweep reads a bounded number
	for k, v := c.First(); k != nil && len(old) < limit && scanned < 10*limit && string(k) < cutoff; k, v = c.Next() {
		scanned++
		if bytes.Contains(v, []byte(`"pending":true`)) {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return 0, fmt.Errorf("event %s: %w", k, err)
			}
			if e.Pending {
				continue
			}
		}
		old = append(old, append([]byte(nil), k...))
	}
	for i, k := range old {
		if err := b.Delete(k); err != nil {
			return i, err
		}
	}
	return len(old), nil
}

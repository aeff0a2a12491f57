package storage

// cancelOn: a workflow's runs cancelled by an event. Two indexes:
//
//	bucket "wfcancelon":  event \x00 workflow → app          the workflows an event may cancel
//	bucket "cancelruns":  workflow \x00 event \x01 match \x00 value \x00 run → CancelEntry
//
// A run of a workflow with cancelOn gets one "cancelruns" record per entry when it
// starts (value: its triggering event's value at the entry's match path, quoted JSON
// text; "" when the entry has no match), and loses them when it ends (Run.CancelKeys), so
// an event reads only the live runs its value names. Records are keyed by the entry's
// event and match, not its position: a run started under an earlier definition is still
// found when the entry is kept.

import (
	"bytes"
	"encoding/json"
	"fmt"
)

const (
	bucketCancelOn   = "wfcancelon"
	bucketCancelRuns = "cancelruns"
)

// CancelOn is one entry of a workflow's cancelOn: an event that cancels the workflow's
// live runs whose triggering event it matches (Match, a dotted path whose values must be
// equal; If, a CEL condition over event and async), within TimeoutMs of the run's
// creation when set.
type CancelOn struct {
	Event     string `json:"event"`
	Match     string `json:"match,omitempty"`
	If        string `json:"if,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// EventCancel is what one workflow's cancelOn did with an event: the runs it cancelled.
type EventCancel struct {
	Workflow  string   `json:"workflow"`
	Cancelled []string `json:"cancelled"`
}

// CancelEntry is a live run in a cancelOn index: its creation time and, for an entry with
// an `if`, its triggering event ({id, name, data, ts}).
type CancelEntry struct {
	CreatedAt int64           `json:"createdAt"`
	Event     json.RawMessage `json:"event,omitempty"`
}

// CancelPrefix is where the runs of a workflow's cancelOn entry (its event and match)
// with value are indexed.
func CancelPrefix(workflow string, c CancelOn, value string) string {
	return workflow + "\x00" + c.Event + "\x01" + c.Match + "\x00" + value + "\x00"
}

// PutCancelEntry indexes a run under key (CancelPrefix + run id).
func (t *Tx) PutCancelEntry(project, key string, e *CancelEntry) error {
	b, err := t.writeBucket(project, bucketCancelRuns)
	if err != nil {
		return err
	}
	return put(b, key, e)
}

// DeleteCancelEntries removes a run's index records.
func (t *Tx) DeleteCancelEntries(project string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	b, err := t.writeBucket(project, bucketCancelRuns)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := b.Delete([]byte(k)); err != nil {
			return err
		}
	}
	return nil
}

// CancelEntries calls fn with each run indexed under prefix (CancelPrefix) until fn
// returns false.
func (t *Tx) CancelEntries(project, prefix string, fn func(runID string, e *CancelEntry) bool) error {
	b := t.bucket(project, bucketCancelRuns)
	if b == nil {
		return nil
	}
	p := []byte(prefix)
	c := b.Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		var e CancelEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("cancelOn index %q: %w", k, err)
		}
		if !fn(string(k[len(p):]), &e) {
			return nil
		}
	}
	return nil
}

// putCancelOnIndex and deleteCancelOnIndex keep "wfcancelon" in step with definitions.
func (t *Tx) putCancelOnIndex(project string, d *WorkflowDef) error {
	if len(d.CancelOn) == 0 {
		return nil
	}
	ix, err := t.writeBucket(project, bucketCancelOn)
	if err != nil {
		return err
	}
	for _, c := range d.CancelOn {
		if err := ix.Put(triggerKey(c.Event, d.Name), []byte(d.App)); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tx) deleteCancelOnIndex(project string, d *WorkflowDef) error {
	if ix := t.bucket(project, bucketCancelOn); ix != nil {
		for _, c := range d.CancelOn {
			if err := ix.Delete(triggerKey(c.Event, d.Name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// CancelledOn lists the definitions whose cancelOn names an event, by workflow name.
func (t *Tx) CancelledOn(project, event string) ([]WorkflowDef, error) {
	return t.defsIndexedBy(project, bucketCancelOn, "cancelOn", event)
}

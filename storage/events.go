package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
)

// Webhooks and run events (lookback) live in the run's own data (bucketRunData, under
// the run's prefix), so DeleteRun removes them with the run. Run events also have an
// index by arrival time (bucketEventExpiry) so that the sweeper can expire them without
// reading every run.

const (
	bucketEventExpiry = "eventexpiry"
	kindWebhook       = 'w'
	kindEvent         = 'e'
)

// Webhook is a webhook created by context.createWebhook: its URL carries Secret, and only
// a call with that secret resolves the run's WaitForWebhook of EventID.
type Webhook struct {
	Secret    string `json:"secret"`
	CreatedAt int64  `json:"createdAt"`
}

// PutWebhook records a run's webhook.
func (t *Tx) PutWebhook(project, runID, eventID string, w *Webhook) error {
	b, err := t.writeBucket(project, bucketRunData)
	if err != nil {
		return err
	}
	data, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return b.Put(append(runDataPrefix(runID, kindWebhook), eventID...), data)
}

// Webhook reads a run's webhook (ErrNotFound if the run created none for eventID).
func (t *Tx) Webhook(project, runID, eventID string) (*Webhook, error) {
	b := t.bucket(project, bucketRunData)
	if b == nil {
		return nil, ErrNotFound
	}
	data := b.Get(append(runDataPrefix(runID, kindWebhook), eventID...))
	if data == nil {
		return nil, ErrNotFound
	}
	var w Webhook
	return &w, json.Unmarshal(data, &w)
}

// RunEventUsage is what a run's kept events take: their count and summed size (event
// ids and data).
type RunEventUsage struct {
	Count int
	Bytes int64
}

func eventKey(runID, eventID string) []byte {
	return append(runDataPrefix(runID, kindEvent), eventID...)
}

// RunEvents reports the events kept for a run, leaving out eventID (which a put replaces).
func (t *Tx) RunEvents(project, runID, except string) (RunEventUsage, error) {
	var u RunEventUsage
	b := t.bucket(project, bucketRunData)
	if b == nil {
		return u, nil
	}
	prefix := runDataPrefix(runID, kindEvent)
	skip := eventKey(runID, except)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if bytes.Equal(k, skip) || len(v) < 8 {
			continue
		}
		u.Count++
		u.Bytes += int64(len(k) - len(prefix) + len(v) - 8) // event id and data
	}
	return u, nil
}

// PutRunEvent keeps an event that arrived for a run before it waited for it, replacing an
// earlier one of the same event. The caller checks the run's limits (RunEvents).
func (t *Tx) PutRunEvent(project, runID, eventID string, data []byte, nowMs int64) error {
	if _, err := t.TakeRunEvent(project, runID, eventID, 0); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	b, err := t.writeBucket(project, bucketRunData)
	if err != nil {
		return err
	}
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(data)), uint64(nowMs))
	if err := b.Put(eventKey(runID, eventID), append(v, data...)); err != nil {
		return err
	}
	exp, err := t.writeBucket(project, bucketEventExpiry)
	if err != nil {
		return err
	}
	return exp.Put(expiryKey(nowMs, runID, eventID), nil)
}

func expiryKey(atMs int64, runID, eventID string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(runID)+1+len(eventID)), uint64(atMs))
	return append(append(append(k, runID...), 0), eventID...)
}

// TakeRunEvent returns and removes a kept event (ErrNotFound if none). An event kept
// before notBeforeMs has expired: it is removed and reported as not found.
func (t *Tx) TakeRunEvent(project, runID, eventID string, notBeforeMs int64) ([]byte, error) {
	if b := t.bucket(project, bucketRunData); b != nil {
		k := eventKey(runID, eventID)
		if v := b.Get(k); len(v) >= 8 {
			at := int64(binary.BigEndian.Uint64(v[:8]))
			out := append([]byte(nil), v[8:]...)
			if err := b.Delete(k); err != nil {
				return nil, err
			}
			if exp := t.bucket(project, bucketEventExpiry); exp != nil {
				if err := exp.Delete(expiryKey(at, runID, eventID)); err != nil {
					return nil, err
				}
			}
			if at < notBeforeMs {
				return nil, ErrNotFound
			}
			return out, nil
		}
	}
	return t.takeLegacyLookback(project, runID, eventID)
}

// DeleteRunEvents removes every event kept for a run.
func (t *Tx) DeleteRunEvents(project, runID string) error {
	b := t.bucket(project, bucketRunData)
	if b == nil {
		return nil
	}
	prefix := runDataPrefix(runID, kindEvent)
	var ids []string
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ids = append(ids, string(k[len(prefix):]))
	}
	for _, id := range ids {
		if _, err := t.TakeRunEvent(project, runID, id, 0); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

// DeleteExpiredRunEvents removes up to limit events kept since before beforeMs, and the
// index entries of events already gone (taken, or deleted with their run). It returns
// how many index entries it removed.
func (t *Tx) DeleteExpiredRunEvents(project string, beforeMs int64, limit int) (int, error) {
	exp := t.bucket(project, bucketEventExpiry)
	if exp == nil {
		return 0, nil
	}
	type entry struct {
		key          []byte
		runID, event string
		atMs         int64
	}
	var due []entry
	c := exp.Cursor()
	for k, _ := c.First(); k != nil && len(due) < limit; k, _ = c.Next() {
		at := int64(binary.BigEndian.Uint64(k[:8]))
		if at >= beforeMs {
			break
		}
		run, event, _ := bytes.Cut(k[8:], []byte{0})
		due = append(due, entry{key: append([]byte(nil), k...), runID: string(run), event: string(event), atMs: at})
	}
	data := t.bucket(project, bucketRunData)
	for _, e := range due {
		if data != nil {
			k := eventKey(e.runID, e.event)
			// Only the event this index entry was written for: a newer one of the same
			// event has an index entry of its own.
			if v := data.Get(k); len(v) >= 8 && int64(binary.BigEndian.Uint64(v[:8])) == e.atMs {
				if err := data.Delete(k); err != nil {
					return 0, err
				}
			}
		}
		if err := exp.Delete(e.key); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}

// takeLegacyLookback reads an event kept by a version before run events had limits
// (bucketLookback, no arrival time).
func (t *Tx) takeLegacyLookback(project, runID, eventID string) ([]byte, error) {
	b := t.bucket(project, bucketLookback)
	if b == nil {
		return nil, ErrNotFound
	}
	k := []byte(runID + "\x00" + eventID)
	v := b.Get(k)
	if v == nil {
		return nil, ErrNotFound
	}
	out := append([]byte(nil), v...)
	return out, b.Delete(k)
}

// MigrateLegacyLookback moves up to limit events of the pre-limit lookback bucket into
// run events kept since nowMs, so that they expire like the others. It returns how many
// it moved.
func (t *Tx) MigrateLegacyLookback(project string, nowMs int64, limit int) (int, error) {
	b := t.bucket(project, bucketLookback)
	if b == nil {
		return 0, nil
	}
	type entry struct{ runID, event string }
	var todo []entry
	c := b.Cursor()
	for k, _ := c.First(); k != nil && len(todo) < limit; k, _ = c.Next() {
		run, event, _ := bytes.Cut(k, []byte{0})
		todo = append(todo, entry{string(run), string(event)})
	}
	for _, e := range todo {
		data, err := t.takeLegacyLookback(project, e.runID, e.event)
		if err != nil {
			return 0, err
		}
		if _, err := t.Run(project, e.runID); errors.Is(err, ErrNotFound) {
			continue // the run is gone: the event goes with it
		}
		if err := t.PutRunEvent(project, e.runID, e.event, data, nowMs); err != nil {
			return 0, err
		}
	}
	return len(todo), nil
}

package storage

// Waiters: runs waiting for an event, keyed by event then run (bucket "waiters").

import "encoding/json"

// Waiter is a run waiting for an event (context.waitForEvent / waitForWebhook).
type Waiter struct {
	EventID   string   `json:"eventId"`
	RunID     string   `json:"runId"`
	Deadline  int64    `json:"deadline"` // unix ms
	Timeout   string   `json:"timeout"`
	Step      []byte   `json:"step"`     // the wait step object, raw JSON
	Template  *Message `json:"template"` // how to resume on notify
	OnTimeout *Message `json:"onTimeout"`
	TimerID   string   `json:"timerId"` // the timer message that fires the timeout
	CreatedAt int64    `json:"createdAt"`
}

func waiterKey(eventID, runID string) []byte { return []byte(eventID + "\x00" + runID) }

// PutWaiter registers a waiter; one per (event, run).
func (t *Tx) PutWaiter(project string, w *Waiter) error {
	b, err := t.writeBucket(project, bucketWaiters)
	if err != nil {
		return err
	}
	data, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return b.Put(waiterKey(w.EventID, w.RunID), data)
}

// DeleteWaiter removes a waiter.
func (t *Tx) DeleteWaiter(project, eventID, runID string) error {
	b, err := t.writeBucket(project, bucketWaiters)
	if err != nil {
		return err
	}
	return b.Delete(waiterKey(eventID, runID))
}

// Waiter reads one waiter.
func (t *Tx) Waiter(project, eventID, runID string) (*Waiter, error) {
	b := t.bucket(project, bucketWaiters)
	if b == nil {
		return nil, ErrNotFound
	}
	data := b.Get(waiterKey(eventID, runID))
	if data == nil {
		return nil, ErrNotFound
	}
	var w Waiter
	return &w, json.Unmarshal(data, &w)
}

// Waiters lists up to limit waiters of an event, and no more once their stored size
// reaches maxBytes (0: no byte limit; at least one).
func (t *Tx) Waiters(project, eventID string, limit, maxBytes int) ([]Waiter, error) {
	b := t.bucket(project, bucketWaiters)
	if b == nil {
		return nil, nil
	}
	var out []Waiter
	prefix := eventID + "\x00"
	c := b.Cursor()
	size := 0
	for k, v := c.Seek([]byte(prefix)); k != nil && len(out) < limit && !pageFull(size, maxBytes) && len(k) >= len(prefix) && string(k[:len(prefix)]) == prefix; k, v = c.Next() {
		var w Waiter
		if err := json.Unmarshal(v, &w); err != nil {
			return nil, err
		}
		out = append(out, w)
		size += len(v)
	}
	return out, nil
}

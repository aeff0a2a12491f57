package storage

// Waiters: runs waiting for an event, keyed by event then run (bucket "waiters"). A
// waiter may carry a condition (a wait's `if` or `match`); the keys of one event are
//
//	event \x00 run                    a plain waiter
//	event \x01 run                    a waiter with an `if` condition
//	event \x02 run                    a waiter with a `match` condition
//	event \x03 path \x00 value \x00 run  the index of match waiters by value
//	event \x04 path                   how many match waiters index path (decimal)
//	event \x05 run                    an `if` waiter's condition and run event: uvarint
//	                                  length of the condition, the condition, the event
//	                                  JSON (read without decoding the waiter)
//
// so a plain notify reads plain waiters only, an event finds its match waiters by its
// own value of each indexed path, and the `if` scan reads small records. Event ids hold
// no control characters (server and native checks).

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/duraton/duraton/storage/kv"
)

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
	// If is the wait's condition, a CEL expression over `event` (Event) and `async` (the
	// incoming event); "" for a plain wait.
	If string `json:"if,omitempty"`
	// Match is set when If is a match ("async.<path> == event.<path>"): the waiter is
	// indexed by Value, its run event's value at Path as quoted JSON text ("" when the
	// run's event has none: no incoming event can match it).
	Match *WaitMatch `json:"match,omitempty"`
	// Event is the run's triggering event ({id, name, data, ts}) an `if` condition reads.
	Event json.RawMessage `json:"event,omitempty"`
}

// WaitMatch is a match condition's path and its run's value there.
type WaitMatch struct {
	Path  string `json:"path"`
	Value string `json:"value,omitempty"`
}

// IfWaiter is what the scan of an event's `if` waiters reads: the condition and the run
// event, without the rest of the waiter. Event is only valid during the callback.
type IfWaiter struct {
	RunID string
	If    string
	Event []byte
}

const (
	waitPlain = "\x00"
	waitIf    = "\x01"
	waitMatch = "\x02"
	waitIndex = "\x03"
	waitPaths = "\x04"
	waitCond  = "\x05"
)

func waiterKey(eventID, runID string) []byte { return []byte(eventID + waitPlain + runID) }

func (w *Waiter) key() []byte {
	switch {
	case w.Match != nil:
		return []byte(w.EventID + waitMatch + w.RunID)
	case w.If != "":
		return []byte(w.EventID + waitIf + w.RunID)
	}
	return waiterKey(w.EventID, w.RunID)
}

func matchIndexPrefix(eventID, path, value string) string {
	return eventID + waitIndex + path + "\x00" + value + "\x00"
}

// PutWaiter registers a waiter; one per (event, run): a previous one is replaced.
func (t *Tx) PutWaiter(project string, w *Waiter) error {
	if err := t.DeleteWaiter(project, w.EventID, w.RunID); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	b, err := t.writeBucket(project, bucketWaiters)
	if err != nil {
		return err
	}
	data, err := json.Marshal(w)
	if err != nil {
		return err
	}
	if err := b.Put(w.key(), data); err != nil {
		return err
	}
	switch {
	case w.Match != nil && w.Match.Value != "":
		if err := b.Put([]byte(matchIndexPrefix(w.EventID, w.Match.Path, w.Match.Value)+w.RunID), []byte{}); err != nil {
			return err
		}
		return t.countPath(b, w.EventID, w.Match.Path, 1)
	case w.Match == nil && w.If != "":
		cond := binary.AppendUvarint(nil, uint64(len(w.If)))
		cond = append(append(cond, w.If...), w.Event...)
		return b.Put([]byte(w.EventID+waitCond+w.RunID), cond)
	}
	return nil
}

// countPath adds delta to the number of match waiters of eventID indexed by path.
func (t *Tx) countPath(b kv.Bucket, eventID, path string, delta int) error {
	k := []byte(eventID + waitPaths + path)
	n := 0
	if v := b.Get(k); v != nil {
		var err error
		if n, err = strconv.Atoi(string(v)); err != nil {
			return err
		}
	}
	if n += delta; n <= 0 {
		return b.Delete(k)
	}
	return b.Put(k, []byte(strconv.Itoa(n)))
}

// DeleteWaiter removes a waiter of any kind (and its index entries).
func (t *Tx) DeleteWaiter(project, eventID, runID string) error {
	b, err := t.writeBucket(project, bucketWaiters)
	if err != nil {
		return err
	}
	w, err := t.Waiter(project, eventID, runID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := b.Delete(w.key()); err != nil {
		return err
	}
	switch {
	case w.Match != nil && w.Match.Value != "":
		if err := b.Delete([]byte(matchIndexPrefix(eventID, w.Match.Path, w.Match.Value) + runID)); err != nil {
			return err
		}
		return t.countPath(b, eventID, w.Match.Path, -1)
	case w.Match == nil && w.If != "":
		return b.Delete([]byte(eventID + waitCond + runID))
	}
	return nil
}

// Waiter reads one waiter of any kind.
func (t *Tx) Waiter(project, eventID, runID string) (*Waiter, error) {
	b := t.bucket(project, bucketWaiters)
	if b == nil {
		return nil, ErrNotFound
	}
	for _, kind := range []string{waitPlain, waitIf, waitMatch} {
		data := b.Get([]byte(eventID + kind + runID))
		if data == nil {
			continue
		}
		var w Waiter
		return &w, json.Unmarshal(data, &w)
	}
	return nil, ErrNotFound
}

// Waiters lists up to limit plain waiters of an event (those without a condition), and
// no more once their stored size reaches maxBytes (0: no byte limit; at least one).
func (t *Tx) Waiters(project, eventID string, limit, maxBytes int) ([]Waiter, error) {
	return t.scanWaiters(project, eventID+waitPlain, nil, limit, maxBytes)
}

// AllWaiters lists an event's waiters of every kind (plain, then if, then match) as
// Waiters does.
func (t *Tx) AllWaiters(project, eventID string, limit, maxBytes int) ([]Waiter, error) {
	var out []Waiter
	for _, kind := range []string{waitPlain, waitIf, waitMatch} {
		ws, err := t.scanWaiters(project, eventID+kind, out, limit, maxBytes)
		if err != nil {
			return nil, err
		}
		out = ws
	}
	return out, nil
}

func (t *Tx) scanWaiters(project, prefix string, out []Waiter, limit, maxBytes int) ([]Waiter, error) {
	b := t.bucket(project, bucketWaiters)
	if b == nil {
		return out, nil
	}
	c := b.Cursor()
	size := 0
	for _, w := range out {
		size += len(w.Step) // approximate: a page already holding waiters counts them
	}
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

// MatchPaths lists the paths an event's match waiters are indexed by.
func (t *Tx) MatchPaths(project, eventID string) ([]string, error) {
	b := t.bucket(project, bucketWaiters)
	if b == nil {
		return nil, nil
	}
	prefix := eventID + waitPaths
	var out []string
	c := b.Cursor()
	for k, _ := c.Seek([]byte(prefix)); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == prefix; k, _ = c.Next() {
		out = append(out, string(k[len(prefix):]))
	}
	return out, nil
}

// MatchWaiters lists up to limit match waiters of an event indexed by path with value
// (quoted JSON text), without reading any other waiter.
func (t *Tx) MatchWaiters(project, eventID, path, value string, limit int) ([]Waiter, error) {
	b := t.bucket(project, bucketWaiters)
	if b == nil {
		return nil, nil
	}
	prefix := matchIndexPrefix(eventID, path, value)
	var runs []string
	c := b.Cursor()
	for k, _ := c.Seek([]byte(prefix)); k != nil && len(runs) < limit && len(k) >= len(prefix) && string(k[:len(prefix)]) == prefix; k, _ = c.Next() {
		runs = append(runs, string(k[len(prefix):]))
	}
	out := make([]Waiter, 0, len(runs))
	for _, run := range runs {
		data := b.Get([]byte(eventID + waitMatch + run))
		if data == nil {
			continue // an index entry without its waiter: nothing to wake
		}
		var w Waiter
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// IfWaiters calls fn with each `if` waiter of an event (its condition and run event, in
// run order) until fn returns false.
func (t *Tx) IfWaiters(project, eventID string, fn func(w *IfWaiter) bool) error {
	b := t.bucket(project, bucketWaiters)
	if b == nil {
		return nil
	}
	prefix := eventID + waitCond
	c := b.Cursor()
	for k, v := c.Seek([]byte(prefix)); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == prefix; k, v = c.Next() {
		n, w := binary.Uvarint(v)
		if w <= 0 || uint64(len(v)-w) < n {
			return fmt.Errorf("waiter %q: malformed condition record", k)
		}
		iw := IfWaiter{RunID: string(k[len(prefix):]), If: string(v[w : w+int(n)]), Event: v[w+int(n):]}
		if !fn(&iw) {
			return nil
		}
	}
	return nil
}

package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
)

// Native timers: delayed events (POST /events with ts or delay) and the next fire of each
// cron trigger of a workflow definition, in one index ordered by due time, so that the
// native flusher finds what is due without reading every event or definition, and sleeps
// until the earliest. An entry's value is its whole record: a delayed event is fanned out
// from it even when retention has removed the event's listing record meanwhile.
const (
	bucketNativeTimers = "nativetimers" // 8-byte big-endian due (unix ms) + kind + id → record
	bucketCronTimers   = "crontimers"   // workflow + NUL + trigger index → 8-byte due of its entry

	timerEvent = 'e'
	timerCron  = 'c'
)

// CronTimer is the next fire of one cron trigger of a workflow: At is the scheduled
// instant (unix ms) it stands for.
type CronTimer struct {
	Workflow string `json:"workflow"`
	Trigger  int    `json:"trigger"` // index in the definition's triggers
	Cron     string `json:"cron"`
	TZ       string `json:"tz,omitempty"`
	At       int64  `json:"at"`
}

func (c *CronTimer) id() string { return cronID(c.Workflow, c.Trigger) }

func cronID(workflow string, trigger int) string {
	return workflow + "\x00" + strconv.Itoa(trigger)
}

// NativeTimer is one due entry: a delayed event (Event, due at Event.ScheduledFor) or a
// cron fire (Cron, due at Cron.At).
type NativeTimer struct {
	At    int64
	Event *Event
	Cron  *CronTimer
}

func timerKey(at int64, kind byte, id string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 9+len(id)), uint64(at))
	return append(append(k, kind), id...)
}

// PutDelayedEvent stores an event that fans out at e.ScheduledFor: its listing record
// (GET /events) and its timer.
func (t *Tx) PutDelayedEvent(project string, e *Event) error {
	if e.ScheduledFor <= 0 {
		return fmt.Errorf("delayed event %s: no scheduledFor", e.ID)
	}
	if err := t.PutEvent(project, e); err != nil {
		return err
	}
	b, err := t.writeBucket(project, bucketNativeTimers)
	if err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return b.Put(timerKey(e.ScheduledFor, timerEvent, e.ID), data)
}

// CronTimerOf reads the pending fire of a workflow's cron trigger (ErrNotFound: none).
func (t *Tx) CronTimerOf(project, workflow string, trigger int) (*CronTimer, error) {
	ix := t.bucket(project, bucketCronTimers)
	if ix == nil {
		return nil, ErrNotFound
	}
	id := cronID(workflow, trigger)
	at := ix.Get([]byte(id))
	if len(at) != 8 {
		return nil, ErrNotFound
	}
	var c CronTimer
	if err := get(t.bucket(project, bucketNativeTimers), string(timerKey(int64(binary.BigEndian.Uint64(at)), timerCron, id)), &c); err != nil {
		return nil, fmt.Errorf("cron timer %q: %w", id, err)
	}
	return &c, nil
}

// PutCronTimer stores the next fire of a cron trigger, replacing the trigger's pending one.
func (t *Tx) PutCronTimer(project string, c *CronTimer) error {
	if err := t.deleteCronTimer(project, c.id()); err != nil {
		return err
	}
	b, err := t.writeBucket(project, bucketNativeTimers)
	if err != nil {
		return err
	}
	ix, err := t.writeBucket(project, bucketCronTimers)
	if err != nil {
		return err
	}
	if err := put(b, string(timerKey(c.At, timerCron, c.id())), c); err != nil {
		return err
	}
	return ix.Put([]byte(c.id()), binary.BigEndian.AppendUint64(nil, uint64(c.At)))
}

// deleteCronTimer removes the pending fire of the trigger id, if any.
func (t *Tx) deleteCronTimer(project, id string) error {
	ix := t.bucket(project, bucketCronTimers)
	if ix == nil {
		return nil
	}
	at := ix.Get([]byte(id))
	if at == nil {
		return nil
	}
	if len(at) != 8 {
		return fmt.Errorf("cron timer %q: malformed index value", id)
	}
	if b := t.bucket(project, bucketNativeTimers); b != nil {
		if err := b.Delete(timerKey(int64(binary.BigEndian.Uint64(at)), timerCron, id)); err != nil {
			return err
		}
	}
	return ix.Delete([]byte(id))
}

// DeleteCronTimer removes the pending fire of a workflow's cron trigger (none: no-op).
func (t *Tx) DeleteCronTimer(project, workflow string, trigger int) error {
	return t.deleteCronTimer(project, cronID(workflow, trigger))
}

// DeleteCronTimers removes the pending fires of every cron trigger of a workflow.
func (t *Tx) DeleteCronTimers(project, workflow string) error {
	ix := t.bucket(project, bucketCronTimers)
	if ix == nil {
		return nil
	}
	prefix := []byte(workflow + "\x00")
	var ids []string
	c := ix.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ids = append(ids, string(k))
	}
	for _, id := range ids {
		if err := t.deleteCronTimer(project, id); err != nil {
			return err
		}
	}
	return nil
}

// DueNativeTimers lists up to limit timers due at or before nowMs, earliest first.
func (t *Tx) DueNativeTimers(project string, nowMs int64, limit int) ([]NativeTimer, error) {
	b := t.bucket(project, bucketNativeTimers)
	if b == nil {
		return nil, nil
	}
	var out []NativeTimer
	c := b.Cursor()
	for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
		if len(k) < 9 {
			return nil, fmt.Errorf("native timers: malformed key %q", k)
		}
		at := int64(binary.BigEndian.Uint64(k[:8]))
		if at > nowMs {
			break
		}
		nt := NativeTimer{At: at}
		switch k[8] {
		case timerEvent:
			nt.Event = new(Event)
			if err := json.Unmarshal(v, nt.Event); err != nil {
				return nil, fmt.Errorf("delayed event %s: %w", k[9:], err)
			}
		case timerCron:
			nt.Cron = new(CronTimer)
			if err := json.Unmarshal(v, nt.Cron); err != nil {
				return nil, fmt.Errorf("cron timer %q: %w", k[9:], err)
			}
		default:
			return nil, fmt.Errorf("native timers: unknown kind in key %q", k)
		}
		out = append(out, nt)
	}
	return out, nil
}

// DeleteNativeTimer removes a timer DueNativeTimers returned (fired).
func (t *Tx) DeleteNativeTimer(project string, nt NativeTimer) error {
	switch {
	case nt.Cron != nil:
		c, err := t.CronTimerOf(project, nt.Cron.Workflow, nt.Cron.Trigger)
		if err != nil || c.At != nt.At {
			return nil // replaced meanwhile (the definition was registered again)
		}
		return t.deleteCronTimer(project, nt.Cron.id())
	case nt.Event != nil:
		b := t.bucket(project, bucketNativeTimers)
		if b == nil {
			return nil
		}
		return b.Delete(timerKey(nt.At, timerEvent, nt.Event.ID))
	}
	return fmt.Errorf("native timer at %d: neither an event nor a cron fire", nt.At)
}

// NextNativeTimer is the earliest due time of a project's timers (false: none).
func (t *Tx) NextNativeTimer(project string) (int64, bool) {
	b := t.bucket(project, bucketNativeTimers)
	if b == nil {
		return 0, false
	}
	k, _ := b.Cursor().First()
	if len(k) < 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k[:8])), true
}

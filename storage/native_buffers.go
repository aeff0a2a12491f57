package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/duraton/duraton/storage/kv"
)

// Debounce and batch buffers of native workflows (docs/protocol.md, "Controls"): the events a gate
// holds for one scope until its deadline, with a deadline index so that the flusher finds
// the due ones without reading every buffer.
const (
	bucketGateBufs   = "gatebufs"
	bucketGateBufDue = "gatebufdue" // 8-byte big-endian deadline (unix ms) + buffer key
)

// BufferedEvent is one event held by a buffer, as the run's payload will carry it.
type BufferedEvent struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Data json.RawMessage `json:"data"`
	Ts   int64           `json:"ts"`
}

// GateBuffer is a debounce or batch buffer of one workflow scope. Times are unix ms.
// A debounce buffer holds the last event of its burst and Received counts the burst; a
// batch buffer holds its events in receive order.
type GateBuffer struct {
	Workflow string          `json:"workflow"`
	Gate     string          `json:"gate"` // "debounce" or "batch"
	FirstAt  int64           `json:"firstAt"`
	Deadline int64           `json:"deadline"`
	Received int             `json:"received"`
	Events   []BufferedEvent `json:"events"`
}

func bufDueKey(deadline int64, key string) []byte {
	k := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(k, uint64(deadline))
	return append(k, key...)
}

// GateBuffer reads the buffer of one scope; ErrNotFound when it holds nothing.
func (t *Tx) GateBuffer(project, key string) (*GateBuffer, error) {
	var b GateBuffer
	if err := get(t.bucket(project, bucketGateBufs), key, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// PutGateBuffer stores the buffer of one scope and moves its deadline in the index.
func (t *Tx) PutGateBuffer(project, key string, b *GateBuffer) error {
	bufs, err := t.writeBucket(project, bucketGateBufs)
	if err != nil {
		return err
	}
	due, err := t.writeBucket(project, bucketGateBufDue)
	if err != nil {
		return err
	}
	if err := t.deleteBufDue(bufs, due, key); err != nil {
		return err
	}
	if err := put(bufs, key, b); err != nil {
		return err
	}
	return due.Put(bufDueKey(b.Deadline, key), nil)
}

// deleteBufDue removes the index entry of the stored buffer of key, if any.
func (t *Tx) deleteBufDue(bufs, due kv.Bucket, key string) error {
	v := bufs.Get([]byte(key))
	if v == nil {
		return nil
	}
	var old GateBuffer
	if err := json.Unmarshal(v, &old); err != nil {
		return fmt.Errorf("gate buffer %q: %w", key, err)
	}
	return due.Delete(bufDueKey(old.Deadline, key))
}

// DeleteGateBuffer removes the buffer of one scope and its index entry (none: no-op).
func (t *Tx) DeleteGateBuffer(project, key string) error {
	bufs, due := t.bucket(project, bucketGateBufs), t.bucket(project, bucketGateBufDue)
	if bufs == nil || due == nil {
		return nil
	}
	if err := t.deleteBufDue(bufs, due, key); err != nil {
		return err
	}
	return bufs.Delete([]byte(key))
}

// DeleteGateBuffersWithPrefix removes every buffer whose key starts with prefix (a removed
// workflow's) and their index entries.
func (t *Tx) DeleteGateBuffersWithPrefix(project, prefix string) error {
	bufs := t.bucket(project, bucketGateBufs)
	if bufs == nil {
		return nil
	}
	p := []byte(prefix)
	var keys []string
	c := bufs.Cursor()
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		keys = append(keys, string(k))
	}
	for _, k := range keys {
		if err := t.DeleteGateBuffer(project, k); err != nil {
			return err
		}
	}
	return nil
}

// DueGateBuffers lists the keys of up to limit buffers whose deadline is at or before
// nowMs, earliest first.
func (t *Tx) DueGateBuffers(project string, nowMs int64, limit int) ([]string, error) {
	due := t.bucket(project, bucketGateBufDue)
	if due == nil {
		return nil, nil
	}
	var out []string
	c := due.Cursor()
	for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
		if len(k) < 8 {
			return nil, fmt.Errorf("gate buffer index: malformed key %q", k)
		}
		if int64(binary.BigEndian.Uint64(k[:8])) > nowMs {
			break
		}
		out = append(out, string(k[8:]))
	}
	return out, nil
}

// NextGateBufferDeadline is the earliest deadline of a project's buffers (false: none).
func (t *Tx) NextGateBufferDeadline(project string) (int64, bool) {
	due := t.bucket(project, bucketGateBufDue)
	if due == nil {
		return 0, false
	}
	k, _ := due.Cursor().First()
	if len(k) < 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k[:8])), true
}

// GateBuffers lists a project's buffers by key (the backlogs of GET /flow-state).
func (t *Tx) GateBuffers(project string) ([]GateBuffer, error) {
	bufs := t.bucket(project, bucketGateBufs)
	if bufs == nil {
		return nil, nil
	}
	var out []GateBuffer
	err := bufs.ForEach(func(k, v []byte) error {
		var b GateBuffer
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("gate buffer %q: %w", k, err)
		}
		out = append(out, b)
		return nil
	})
	return out, err
}

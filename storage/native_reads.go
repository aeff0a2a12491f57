package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ForEachGate calls fn for each gate state whose key starts with prefix, in key order,
// until fn returns false; at most limit states are read. It reports whether it stopped
// at the limit with states left unread.
func (t *Tx) ForEachGate(project, prefix string, limit int, fn func(key string, st *GateState) bool) (truncated bool, err error) {
	b := t.bucket(project, bucketGates)
	if b == nil {
		return false, nil
	}
	p := []byte(prefix)
	c := b.Cursor()
	n := 0
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if n == limit {
			return true, nil
		}
		n++
		var st GateState
		if err := json.Unmarshal(v, &st); err != nil {
			return false, fmt.Errorf("gate state %q: %w", k, err)
		}
		if !fn(string(k), &st) {
			return false, nil
		}
	}
	return false, nil
}

// ForEachGateBuffer calls fn for each debounce or batch buffer whose key starts with
// prefix, in key order; at most limit are read. It reports whether it stopped at the
// limit with buffers left unread.
func (t *Tx) ForEachGateBuffer(project, prefix string, limit int, fn func(b *GateBuffer)) (truncated bool, err error) {
	bufs := t.bucket(project, bucketGateBufs)
	if bufs == nil {
		return false, nil
	}
	p := []byte(prefix)
	c := bufs.Cursor()
	n := 0
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if n == limit {
			return true, nil
		}
		n++
		var b GateBuffer
		if err := json.Unmarshal(v, &b); err != nil {
			return false, fmt.Errorf("gate buffer %q: %w", k, err)
		}
		fn(&b)
	}
	return false, nil
}

package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// History entries are written on every step and read back, all of them, to build every
// delivery of a run, so like messages (msgcodec.go) they have a binary record:
//
//	0x01 ‖ zigzag varint createdAt ‖ uvarint len ‖ message id ‖ uvarint len ‖ call type ‖ body
//
// (the body is the rest of the record). Entries written before are JSON and start with
// '{'; they are still read. Another first byte is a later format, refused by name.
const histFormat1 = 0x01

func encodeHistory(e *HistoryEntry) []byte {
	buf := make([]byte, 0, 1+binary.MaxVarintLen64+2+len(e.MessageID)+len(e.CallType)+len(e.Body))
	buf = append(buf, histFormat1)
	buf = binary.AppendVarint(buf, e.CreatedAt)
	buf = appendString(buf, e.MessageID)
	buf = appendString(buf, e.CallType)
	return append(buf, e.Body...)
}

// HistoryView is a history entry as stored: its slices point into the database and are
// valid only inside the callback that received it.
type HistoryView struct {
	MessageID, CallType, Body []byte
	CreatedAt                 int64
}

// viewHistory reads a record of either format without copying format 1.
func viewHistory(data []byte) (HistoryView, error) {
	if len(data) > 0 && data[0] == '{' {
		var e HistoryEntry
		if err := json.Unmarshal(data, &e); err != nil {
			return HistoryView{}, err
		}
		return HistoryView{MessageID: []byte(e.MessageID), CallType: []byte(e.CallType), Body: e.Body, CreatedAt: e.CreatedAt}, nil
	}
	if len(data) == 0 || data[0] != histFormat1 {
		return HistoryView{}, fmt.Errorf("history record: unknown format (written by a newer Duraton?)")
	}
	var v HistoryView
	d := decoder{b: data[1:]}
	created, k := binary.Varint(d.b)
	if k <= 0 {
		return HistoryView{}, fmt.Errorf("history record: truncated")
	}
	d.pos = k
	v.CreatedAt = created
	v.MessageID = d.bytes()
	v.CallType = d.bytes()
	if d.err != nil {
		return HistoryView{}, fmt.Errorf("history record: %v", d.err)
	}
	v.Body = d.b[d.pos:]
	return v, nil
}

// EachHistory calls fn with the first n entries of a run's history, in order, without
// copying them (see HistoryView).
func (t *Tx) EachHistory(project, runID string, n int, fn func(HistoryView) error) error {
	b := t.bucket(project, bucketRunData)
	if b == nil {
		return ErrNotFound
	}
	c := b.Cursor()
	prefix := runDataPrefix(runID, 'h')
	i := 0
	for k, v := c.Seek(prefix); k != nil && i < n && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		h, err := viewHistory(v)
		if err != nil {
			return fmt.Errorf("history %s: %w", runID, err)
		}
		if err := fn(h); err != nil {
			return err
		}
		i++
	}
	return nil
}

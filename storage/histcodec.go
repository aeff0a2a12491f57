package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/duraton/duraton/flowctl"
)

// History entries are written on every step and read back, all of them, to build every
// delivery of a run, so like messages (msgcodec.go) they have a binary record:
//
//	0x01 ‖ zigzag varint createdAt ‖ uvarint len ‖ message id ‖ uvarint len ‖ call type ‖
//	0 | 1 ‖ uvarint len ‖ AI usage as JSON (an AI callback's entry only) ‖ body
//
// (the body is the rest of the record). Entries written before are JSON and start with
// '{'; they are still read. Another first byte is a later format, refused by name.
const histFormat1 = 0x01

func encodeHistory(e *HistoryEntry) ([]byte, error) {
	buf := make([]byte, 0, 1+binary.MaxVarintLen64+3+len(e.MessageID)+len(e.CallType)+len(e.Body))
	buf = append(buf, histFormat1)
	buf = binary.AppendVarint(buf, e.CreatedAt)
	buf = appendString(buf, e.MessageID)
	buf = appendString(buf, e.CallType)
	buf, err := appendOptionalJSON(buf, e.AI)
	if err != nil {
		return nil, err
	}
	return append(buf, e.Body...), nil
}

// HistoryView is a history entry as stored: its slices point into the database and are
// valid only inside the callback that received it.
type HistoryView struct {
	MessageID, CallType, Body []byte
	CreatedAt                 int64
	AI                        *flowctl.AIUsage // decoded (it is rare)
}

// viewHistory reads a record of either format without copying format 1.
func viewHistory(data []byte) (HistoryView, error) {
	if len(data) > 0 && data[0] == '{' {
		var e HistoryEntry
		if err := json.Unmarshal(data, &e); err != nil {
			return HistoryView{}, err
		}
		return HistoryView{MessageID: []byte(e.MessageID), CallType: []byte(e.CallType), Body: e.Body, CreatedAt: e.CreatedAt, AI: e.AI}, nil
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
	if d.pos < len(d.b) && d.b[d.pos] == 1 {
		d.pos++
		raw := d.bytes()
		if d.err == nil {
			v.AI = &flowctl.AIUsage{}
			if err := json.Unmarshal(raw, v.AI); err != nil {
				return HistoryView{}, fmt.Errorf("history record: AI usage: %w", err)
			}
		}
	} else if d.pos < len(d.b) && d.b[d.pos] == 0 {
		d.pos++
	} else {
		d.fail("AI usage")
	}
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

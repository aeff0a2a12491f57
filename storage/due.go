package storage

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/duraton/duraton/flowctl"
)

// DueEntry is one entry of the global due index: a message that must be attempted at
// DueAt. It carries what the dispatcher needs to schedule it without reading the message:
// its queue, its flow-control key and limits, and its order among the key's deliveries.
type DueEntry struct {
	DueAt     int64 // unix ns
	MessageID string
	Project   string
	Queue     string
	FlowKey   string
	Limits    flowctl.Limits
	// OrderAt orders deliveries waiting on one flow-control key: older runs first (the
	// run's creation time in unix ns less its priority shift, or the message's creation
	// time for plain messages).
	OrderAt int64
	// Timer marks an entry that sends nothing (a workflow wait's timeout): no flow-control
	// slot applies to it.
	Timer bool
	// Extra are further keys whose slots the delivery holds (Message.FlowExtra).
	Extra []ExtraKey
	// ShiftMs is the run's priority shift (Message.PriorityShiftMs).
	ShiftMs int64
	// Gate is the run's start gate, on its first delivery until it is admitted.
	Gate *StartGate
	// Tokens is a run's token gate (a native tokenThrottle, tokengate.go).
	Tokens *TokenGate

	// Msg optionally carries the message itself in memory, so a freshly published message
	// is sent without being read back. It is never stored.
	Msg *Message
}

// ExtraKey is a further flow-control key a delivery holds a slot of, with its limit.
type ExtraKey struct {
	Key         string
	Parallelism int
}

// StartGate paces the starts of a native workflow's runs (its throttle: docs/protocol.md,
// "Controls"): the first delivery of a run waits in the scheduler until the scope's GCRA allows
// a start, and the start is booked only then, so a start held back by another constraint
// spends nothing. Key names the scope's stored GCRA state (a gate record).
type StartGate struct {
	Key   string `json:"key"`
	Limit int    `json:"limit"`
	PerMs int64  `json:"perMs"`
}

// Period is the gate's GCRA period.
func (g *StartGate) Period() time.Duration { return time.Duration(g.PerMs) * time.Millisecond }

// Key is the entry's index key; it orders entries by due time, then by message id.
func (e DueEntry) Key() []byte {
	k := make([]byte, 8+len(e.MessageID))
	binary.BigEndian.PutUint64(k, uint64(e.DueAt))
	copy(k[8:], e.MessageID)
	return k
}

// value encodes the entry's fields after the key: project, queue, flow key, parallelism,
// rate, period (ms), order, the timer flag, the extra keys ("key=n;key=n"), the priority
// shift and the start gate (base64 key, limit, period ms), separated by NUL. Names never
// contain NUL (they are validated against token patterns); the gate key may, hence base64.
// Entries written before a field existed decode it as zero.
func (e DueEntry) value() []byte {
	var b bytes.Buffer
	fields := []string{e.Project, e.Queue, e.FlowKey,
		strconv.Itoa(e.Limits.Parallelism), strconv.Itoa(e.Limits.Rate),
		strconv.FormatInt(e.Limits.Period.Milliseconds(), 10), strconv.FormatInt(e.OrderAt, 10), strconv.FormatBool(e.Timer)}
	if len(e.Extra) > 0 || e.ShiftMs != 0 || e.Gate != nil || e.Tokens != nil {
		var extra []string
		for _, x := range e.Extra {
			extra = append(extra, x.Key+"="+strconv.Itoa(x.Parallelism))
		}
		fields = append(fields, strings.Join(extra, ";"), strconv.FormatInt(e.ShiftMs, 10))
		if g := e.Gate; g != nil {
			fields = append(fields, base64.RawURLEncoding.EncodeToString([]byte(g.Key)), strconv.Itoa(g.Limit), strconv.FormatInt(g.PerMs, 10))
		} else if e.Tokens != nil {
			fields = append(fields, "", "", "")
		}
		if g := e.Tokens; g != nil {
			fields = append(fields, g.fields()...)
		}
	}
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(f)
	}
	return b.Bytes()
}

func decodeDue(k, v []byte) (DueEntry, error) {
	if len(k) < 8 {
		return DueEntry{}, fmt.Errorf("due index: short key %x: %w", k, ErrCorrupt)
	}
	e := DueEntry{DueAt: int64(binary.BigEndian.Uint64(k[:8])), MessageID: string(k[8:])}
	f := bytes.Split(v, []byte{0})
	for len(f) < 8 {
		f = append(f, nil) // entries written before flow control had two fields
	}
	e.Project, e.Queue, e.FlowKey = string(f[0]), string(f[1]), string(f[2])
	e.Limits.Parallelism, _ = strconv.Atoi(string(f[3]))
	e.Limits.Rate, _ = strconv.Atoi(string(f[4]))
	period, _ := strconv.ParseInt(string(f[5]), 10, 64)
	e.Limits.Period = msDuration(period)
	e.OrderAt, _ = strconv.ParseInt(string(f[6]), 10, 64)
	e.Timer = string(f[7]) == "true"
	if len(f) > 8 && len(f[8]) > 0 {
		for _, x := range strings.Split(string(f[8]), ";") {
			k, n, _ := strings.Cut(x, "=")
			p, err := strconv.Atoi(n)
			if err != nil || k == "" {
				return DueEntry{}, fmt.Errorf("due index: extra key %q of %s: %w", x, e.MessageID, ErrCorrupt)
			}
			e.Extra = append(e.Extra, ExtraKey{Key: k, Parallelism: p})
		}
	}
	if len(f) > 9 {
		e.ShiftMs, _ = strconv.ParseInt(string(f[9]), 10, 64)
	}
	if len(f) > 16 {
		g, err := decodeTokenGate(f[13:17])
		if err != nil {
			return DueEntry{}, fmt.Errorf("due index: token gate of %s: %w", e.MessageID, err)
		}
		if len(f) > 17 {
			g.Estimate, _ = strconv.ParseInt(string(f[17]), 10, 64)
		}
		e.Tokens = g
	}
	if len(f) > 12 && len(f[10]) > 0 {
		key, err := base64.RawURLEncoding.DecodeString(string(f[10]))
		if err != nil {
			return DueEntry{}, fmt.Errorf("due index: gate key of %s: %w", e.MessageID, ErrCorrupt)
		}
		g := &StartGate{Key: string(key)}
		g.Limit, _ = strconv.Atoi(string(f[11]))
		g.PerMs, _ = strconv.ParseInt(string(f[12]), 10, 64)
		e.Gate = g
	}
	return e, nil
}

// DueOf is the due entry of a message.
func DueOf(m *Message) DueEntry {
	e := DueEntry{DueAt: m.DueAt, MessageID: m.ID, Project: m.Project, Queue: m.Queue, OrderAt: m.OrderAt, Timer: m.Kind == KindWaitTimeout,
		ShiftMs: m.PriorityShiftMs, Gate: m.StartGate, Tokens: m.TokenGate}
	if e.OrderAt == 0 {
		e.OrderAt = m.CreatedAt * int64(time.Millisecond)
	}
	if fc := m.FlowControl; fc != nil {
		e.FlowKey, e.Limits = fc.Key, flowctl.LimitsOf(*fc)
		for _, x := range m.FlowExtra {
			e.Extra = append(e.Extra, ExtraKey{Key: x.Key, Parallelism: x.Parallelism})
		}
	}
	return e
}

// DueWith is the due entry of a message that carries the message along in memory.
func DueWith(m *Message) DueEntry {
	e := DueOf(m)
	e.Msg = m
	return e
}

// PutDue adds an entry to the due index.
func (t *Tx) PutDue(e DueEntry) error {
	return t.dueBucket().Put(e.Key(), e.value())
}

// DeleteDue removes an entry from the due index.
func (t *Tx) DeleteDue(e DueEntry) error {
	return t.dueBucket().Delete(e.Key())
}

// HasDue reports whether the entry is in the due index.
func (t *Tx) HasDue(e DueEntry) bool {
	return t.dueBucket().Get(e.Key()) != nil
}

// ScanDue calls fn for due entries with keys strictly after `after` (nil: from the
// start), in key order, until fn returns false.
func (t *Tx) ScanDue(after []byte, fn func(DueEntry) bool) error {
	c := t.dueBucket().Cursor()
	var k, v []byte
	if after == nil {
		k, v = c.First()
	} else {
		k, v = c.Seek(after)
		if k != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	for ; k != nil; k, v = c.Next() {
		e, err := decodeDue(k, v)
		if err != nil {
			return err
		}
		if !fn(e) {
			return nil
		}
	}
	return nil
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/duraton/duraton/flowctl"
)

// Message records are the hottest records (written by every publish and step, read by
// every attempt whose due entry does not carry the message), so they have a compact
// binary encoding instead of JSON: encoding/json's reflection was a tenth of the
// server's CPU per workflow step.
//
// A record is
//
//	0x01 (format 1) ‖ uvarint len ‖ body ‖ the other fields in encodeMessage's order:
//	strings as uvarint length ‖ bytes, integers as zigzag varints, a bool as one byte,
//	lists and maps as uvarint count ‖ items, optional records as 0 (absent) or 1 ‖
//	record (flow control, start gate and callbacks inline; the token gate, AI usage and
//	redaction, which are rare, as length-prefixed JSON).
//
// Records written before format 1 are JSON and start with '{'; they are still read. Any
// other first byte is a record of a later format, refused with an error that says so.
const msgFormat1 = 0x01

// errMsgFormat is a message record this version cannot read.
var errMsgFormat = errors.New("message record")

// encodeMessage appends m's format-1 record to buf.
func encodeMessage(buf []byte, m *Message) ([]byte, error) {
	buf = append(buf, msgFormat1)
	buf = appendBytes(buf, m.Body)
	for _, s := range [...]string{m.ID, m.Project, m.Kind, m.URL, m.Method, m.Queue, m.CallerIP, m.State,
		m.RetryDelay, m.DedupID, m.SourceMessageID, m.ScheduleID, m.TopicName, m.EndpointName,
		m.RunID, m.CallType, m.EventID} {
		buf = appendString(buf, s)
	}
	for _, n := range [...]int64{int64(m.Hops), m.CreatedAt, m.OrderAt, m.NotBefore, m.DueAt,
		int64(m.Retries), int64(m.Retried), m.TimeoutMs, int64(m.HistoryLen), m.PriorityShiftMs} {
		buf = binary.AppendVarint(buf, n)
	}
	buf = appendBool(buf, m.DetectTrigger)
	buf = appendBool(buf, m.AICall)
	buf = binary.AppendUvarint(buf, uint64(len(m.Labels)))
	for _, l := range m.Labels {
		buf = appendString(buf, l)
	}
	buf = appendHeader(buf, m.Header)
	buf = appendFlow(buf, m.FlowControl)
	buf = appendFlows(buf, m.FlowExtra)
	buf = appendBool(buf, m.StartGate != nil)
	if g := m.StartGate; g != nil {
		buf = appendString(buf, g.Key)
		buf = binary.AppendVarint(buf, int64(g.Limit))
		buf = binary.AppendVarint(buf, g.PerMs)
	}
	buf = appendCallback(buf, m.Callback)
	buf = appendCallback(buf, m.FailureCallback)
	var err error
	// Rare and small: a native tokenThrottle's gate, a metered AI call's usage.
	if buf, err = appendOptionalJSON(buf, m.TokenGate); err != nil {
		return nil, err
	}
	if buf, err = appendOptionalJSON(buf, m.AIUsage); err != nil {
		return nil, err
	}
	return appendOptionalJSON(buf, m.Redact)
}

// messageSizeHint is about the size of m's format-1 record, so that encoding it
// allocates once.
func messageSizeHint(m *Message) int {
	n := 96 + len(m.Body) + len(m.ID) + len(m.Project) + len(m.URL) + len(m.RunID) + len(m.Queue) + len(m.DedupID)
	for k, vs := range m.Header {
		n += len(k) + 2
		for _, v := range vs {
			n += len(v) + 2
		}
	}
	for _, l := range m.Labels {
		n += len(l) + 2
	}
	if m.FlowControl != nil {
		n += len(m.FlowControl.Key) + 16
	}
	for _, c := range [...]*CallbackSpec{m.Callback, m.FailureCallback} {
		if c != nil {
			n += 32 + len(c.URL) + len(c.RunID)
			for k, vs := range c.Header {
				n += len(k) + 2
				for _, v := range vs {
					n += len(v) + 2
				}
			}
		}
	}
	return n
}

// decodeMessage reads a message record of either format into m.
func decodeMessage(data []byte, m *Message) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty", errMsgFormat)
	}
	switch data[0] {
	case '{':
		return json.Unmarshal(data, m) // written before format 1
	case msgFormat1:
	default:
		return fmt.Errorf("%w: unknown format 0x%02x (written by a newer Duraton?)", errMsgFormat, data[0])
	}
	d := decoder{b: data[1:]}
	if body := d.bytes(); len(body) > 0 {
		m.Body = append([]byte(nil), body...) // bbolt's value lives in the mmap
	}
	// The strings are slices of one copy of the rest of the record: one allocation for
	// all of them instead of one each.
	d.s = string(d.b[d.pos:])
	d.b, d.pos = nil, 0
	for _, p := range [...]*string{&m.ID, &m.Project, &m.Kind, &m.URL, &m.Method, &m.Queue, &m.CallerIP, &m.State,
		&m.RetryDelay, &m.DedupID, &m.SourceMessageID, &m.ScheduleID, &m.TopicName, &m.EndpointName,
		&m.RunID, &m.CallType, &m.EventID} {
		*p = d.str()
	}
	m.Hops = int(d.varint())
	m.CreatedAt, m.OrderAt, m.NotBefore, m.DueAt = d.varint(), d.varint(), d.varint(), d.varint()
	m.Retries, m.Retried = int(d.varint()), int(d.varint())
	m.TimeoutMs, m.HistoryLen = d.varint(), int(d.varint())
	m.PriorityShiftMs = d.varint()
	m.DetectTrigger = d.bool()
	m.AICall = d.bool()
	if n := d.count(); n > 0 {
		m.Labels = make([]string, n)
		for i := range m.Labels {
			m.Labels[i] = d.str()
		}
	}
	m.Header = d.header()
	m.FlowControl = d.flow()
	m.FlowExtra = d.flows()
	if d.bool() {
		m.StartGate = &StartGate{Key: d.str(), Limit: int(d.varint()), PerMs: d.varint()}
	}
	m.Callback = d.callback()
	m.FailureCallback = d.callback()
	decodeOptionalJSON(&d, &m.TokenGate)
	decodeOptionalJSON(&d, &m.AIUsage)
	decodeOptionalJSON(&d, &m.Redact)
	if d.err == nil && d.pos != len(d.s) {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return fmt.Errorf("%w: format 1: %v", errMsgFormat, d.err)
	}
	return nil
}

// appendHeader writes a header map: count, then name, value count, values.
func appendHeader(buf []byte, h map[string][]string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(h)))
	for k, vs := range h {
		buf = appendString(buf, k)
		buf = binary.AppendUvarint(buf, uint64(len(vs)))
		for _, v := range vs {
			buf = appendString(buf, v)
		}
	}
	return buf
}

// appendFlow writes an optional flow-control configuration.
func appendFlow(buf []byte, fc *flowctl.Config) []byte {
	buf = appendBool(buf, fc != nil)
	if fc == nil {
		return buf
	}
	buf = appendString(buf, fc.Key)
	buf = binary.AppendVarint(buf, int64(fc.Parallelism))
	buf = binary.AppendVarint(buf, int64(fc.Rate))
	return binary.AppendVarint(buf, int64(fc.Period))
}

// appendFlows writes a list of flow-control configurations.
func appendFlows(buf []byte, fcs []flowctl.Config) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(fcs)))
	for i := range fcs {
		buf = appendFlow(buf, &fcs[i])
	}
	return buf
}

// appendCallback writes an optional callback configuration (every message and run of
// a native workflow carries a failure callback, so it is not rare).
func appendCallback(buf []byte, c *CallbackSpec) []byte {
	buf = appendBool(buf, c != nil)
	if c == nil {
		return buf
	}
	for _, s := range [...]string{c.URL, c.Method, c.RetryDelay, c.RunID, c.CallType} {
		buf = appendString(buf, s)
	}
	for _, n := range [...]int64{int64(c.Retries), c.TimeoutMs, c.DelayMs} {
		buf = binary.AppendVarint(buf, n)
	}
	buf = appendHeader(buf, c.Header)
	return appendFlow(buf, c.FlowControl)
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func appendBytes(buf, b []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...)
}

func appendBool(buf []byte, v bool) []byte {
	if v {
		return append(buf, 1)
	}
	return append(buf, 0)
}

// appendOptionalJSON appends 0 for a nil pointer, else 1 and its length-prefixed JSON.
func appendOptionalJSON[T any](buf []byte, v *T) ([]byte, error) {
	if v == nil {
		return append(buf, 0), nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return appendBytes(append(buf, 1), data), nil
}

// decoder reads a format-1 record: first from b (the body), then from s (the rest, as
// one string). The first error sticks; later reads return zero values.
type decoder struct {
	b   []byte
	s   string
	pos int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated %s", what)
	}
}

// bytes reads a length-prefixed byte string from b (no copy).
func (d *decoder) bytes() []byte {
	n, k := binary.Uvarint(d.b[d.pos:])
	if k <= 0 || n > uint64(len(d.b)-d.pos-k) {
		d.fail("body")
		return nil
	}
	d.pos += k
	out := d.b[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return out
}

// uvarint reads an unsigned varint from s.
func (d *decoder) uvarint() uint64 {
	var x uint64
	for shift := uint(0); d.pos < len(d.s) && shift < 64; shift += 7 {
		c := d.s[d.pos]
		d.pos++
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x
		}
	}
	d.fail("varint")
	return 0
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// count reads a list length, bounded by what is left (each item takes ≥ 1 byte).
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.s)-d.pos) {
		d.fail("list")
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.count()
	if d.err != nil {
		return ""
	}
	s := d.s[d.pos : d.pos+n]
	d.pos += n
	return s
}

func (d *decoder) bool() bool {
	if d.pos >= len(d.s) {
		d.fail("bool")
		return false
	}
	v := d.s[d.pos]
	d.pos++
	return v == 1
}

// header reads what appendHeader wrote (nil when empty).
func (d *decoder) header() map[string][]string {
	n := d.count()
	if n == 0 {
		return nil
	}
	h := make(map[string][]string, n)
	for range n {
		k := d.str()
		vs := make([]string, d.count())
		for i := range vs {
			vs[i] = d.str()
		}
		h[k] = vs
	}
	return h
}

// flow reads what appendFlow wrote.
func (d *decoder) flow() *flowctl.Config {
	if !d.bool() {
		return nil
	}
	return &flowctl.Config{Key: d.str(), Parallelism: int(d.varint()), Rate: int(d.varint()), Period: time.Duration(d.varint())}
}

// flows reads what appendFlows wrote (nil when empty).
func (d *decoder) flows() []flowctl.Config {
	n := d.count()
	if n == 0 {
		return nil
	}
	out := make([]flowctl.Config, 0, n)
	for range n {
		fc := d.flow()
		if fc == nil {
			d.fail("flow-control list")
			return nil
		}
		out = append(out, *fc)
	}
	return out
}

// callback reads what appendCallback wrote.
func (d *decoder) callback() *CallbackSpec {
	if !d.bool() {
		return nil
	}
	c := &CallbackSpec{}
	for _, p := range [...]*string{&c.URL, &c.Method, &c.RetryDelay, &c.RunID, &c.CallType} {
		*p = d.str()
	}
	c.Retries = int(d.varint())
	c.TimeoutMs, c.DelayMs = d.varint(), d.varint()
	c.Header = d.header()
	c.FlowControl = d.flow()
	return c
}

// decodeOptionalJSON reads what appendOptionalJSON wrote into *p.
func decodeOptionalJSON[T any](d *decoder, p **T) {
	if !d.bool() {
		return
	}
	raw := d.str()
	if d.err != nil {
		return
	}
	v := new(T)
	if err := json.Unmarshal([]byte(raw), v); err != nil && d.err == nil {
		d.err = err
	}
	*p = v
}

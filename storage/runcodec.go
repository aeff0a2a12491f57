package storage

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/duraton/duraton/flowctl"
)

// Run records are read by every publish of a run's step (to bind it to the run) and
// rewritten at the run's start and end, so like messages (msgcodec.go) they have a
// binary record:
//
//	0x01 ‖ uvarint len ‖ response ‖ the strings, integers, bools, labels, header, flow
//	controls, keys and failure callback (encoded as in message records) ‖ the AI cap,
//	AI usage, token gate and parent link as optional length-prefixed JSON (rare).
//
// Format 2 (0x02, written now) is format 1 followed by a uvarint of flags (bit 0:
// AwaitingSDK; bit 1: an extension follows, the JSON of runExt: which flow keys are
// expressions and their errors, cancelledBy); format-1 records are still read (no flags).
//
// HistoryLen and HistoryBytes are not part of it (they live in the run's cursor). Runs
// written before are JSON and start with '{'; they are still read. Another first byte
// is a later format, refused by name.
const (
	runFormat1 = 0x01
	runFormat2 = 0x02
)

func encodeRun(r *Run) ([]byte, error) {
	buf := make([]byte, 0, 128+len(r.Response)+len(r.URL)+len(r.ID))
	buf = append(buf, runFormat2)
	buf = appendBytes(buf, r.Response)
	for _, s := range [...]string{r.ID, r.URL, r.State, r.RetryDelay, r.CallerIP, r.DLQID, r.FailureMessageID, r.FailureState} {
		buf = appendString(buf, s)
	}
	for _, n := range [...]int64{r.CreatedAt, r.EndedAt, int64(r.Retries), r.TimeoutMs, r.PriorityShiftMs, int64(r.InvokeDepth), r.OrderNs, r.TokenReserved} {
		buf = binary.AppendVarint(buf, n)
	}
	buf = appendBool(buf, r.HasResp)
	buf = appendBool(buf, r.TokenStarted)
	buf = binary.AppendUvarint(buf, uint64(len(r.Labels)))
	for _, l := range r.Labels {
		buf = appendString(buf, l)
	}
	buf = appendHeader(buf, r.Header)
	buf = appendFlow(buf, r.FlowControl)
	buf = appendFlows(buf, r.FlowExtra)
	buf = binary.AppendUvarint(buf, uint64(len(r.FlowKeys)))
	for _, k := range r.FlowKeys {
		buf = appendString(appendString(appendString(buf, k.Control), k.Path), k.Value)
	}
	buf = appendCallback(buf, r.FailureCallback)
	// Rare and small: the AI spend cap and usage, a tokenThrottle's gate.
	buf, err := appendOptionalJSON(buf, r.AICap)
	if err != nil {
		return nil, err
	}
	if buf, err = appendOptionalJSON(buf, r.AIUsage); err != nil {
		return nil, err
	}
	if buf, err = appendOptionalJSON(buf, r.TokenGate); err != nil {
		return nil, err
	}
	if buf, err = appendOptionalJSON(buf, r.Parent); err != nil {
		return nil, err
	}
	ext := extOf(r)
	buf = binary.AppendUvarint(buf, runFlags(r, ext != nil))
	if ext != nil {
		return appendOptionalJSON(buf, ext)
	}
	return buf, nil
}

const (
	runFlagAwaitingSDK = 1 << 0
	runFlagExt         = 1 << 1
)

func runFlags(r *Run, ext bool) uint64 {
	var f uint64
	if r.AwaitingSDK {
		f |= runFlagAwaitingSDK
	}
	if ext {
		f |= runFlagExt
	}
	return f
}

// runExt holds a run's rarer fields (flag runFlagExt).
type runExt struct {
	Keys        []keyExt     `json:"keys,omitempty"`
	CancelledBy *CancelledBy `json:"cancelledBy,omitempty"`
	CancelKeys  []string     `json:"cancelKeys,omitempty"`
}

// keyExt marks FlowKeys[I] an expression, with the error that left it without a value.
type keyExt struct {
	I     int    `json:"i"`
	Error string `json:"error,omitempty"`
}

func extOf(r *Run) *runExt {
	if r.CancelledBy == nil && len(r.CancelKeys) == 0 && !anyExpr(r.FlowKeys) {
		return nil // no allocation for the common run
	}
	var x runExt
	for i, k := range r.FlowKeys {
		if k.Expr {
			x.Keys = append(x.Keys, keyExt{I: i, Error: k.Error})
		}
	}
	x.CancelledBy, x.CancelKeys = r.CancelledBy, r.CancelKeys
	return &x
}

func anyExpr(keys []flowctl.RunKey) bool {
	for _, k := range keys {
		if k.Expr {
			return true
		}
	}
	return false
}

func (x *runExt) applyTo(r *Run) error {
	for _, k := range x.Keys {
		if k.I < 0 || k.I >= len(r.FlowKeys) {
			return fmt.Errorf("flow key %d of %d", k.I, len(r.FlowKeys))
		}
		r.FlowKeys[k.I].Expr, r.FlowKeys[k.I].Error = true, k.Error
	}
	r.CancelledBy, r.CancelKeys = x.CancelledBy, x.CancelKeys
	return nil
}

// decodeRun reads a run record of either format into r (not its cursor).
func decodeRun(data []byte, r *Run) error {
	if len(data) == 0 {
		return fmt.Errorf("run record: empty")
	}
	format := data[0]
	switch format {
	case '{':
		return json.Unmarshal(data, r) // written before format 1
	case runFormat1, runFormat2:
	default:
		return fmt.Errorf("run record: unknown format 0x%02x (written by a newer Duraton?)", data[0])
	}
	d := decoder{b: data[1:]}
	if resp := d.bytes(); len(resp) > 0 {
		r.Response = append([]byte(nil), resp...)
	}
	d.s = string(d.b[d.pos:]) // one copy for all the strings
	d.b, d.pos = nil, 0
	for _, p := range [...]*string{&r.ID, &r.URL, &r.State, &r.RetryDelay, &r.CallerIP, &r.DLQID, &r.FailureMessageID, &r.FailureState} {
		*p = d.str()
	}
	r.CreatedAt, r.EndedAt = d.varint(), d.varint()
	r.Retries = int(d.varint())
	r.TimeoutMs, r.PriorityShiftMs = d.varint(), d.varint()
	r.InvokeDepth = int(d.varint())
	r.OrderNs = d.varint()
	r.TokenReserved = d.varint()
	r.HasResp = d.bool()
	r.TokenStarted = d.bool()
	if n := d.count(); n > 0 {
		r.Labels = make([]string, n)
		for i := range r.Labels {
			r.Labels[i] = d.str()
		}
	}
	r.Header = d.header()
	r.FlowControl = d.flow()
	r.FlowExtra = d.flows()
	if n := d.count(); n > 0 {
		r.FlowKeys = make([]flowctl.RunKey, n)
		for i := range r.FlowKeys {
			r.FlowKeys[i] = flowctl.RunKey{Control: d.str(), Path: d.str(), Value: d.str()}
		}
	}
	r.FailureCallback = d.callback()
	decodeOptionalJSON(&d, &r.AICap)
	decodeOptionalJSON(&d, &r.AIUsage)
	decodeOptionalJSON(&d, &r.TokenGate)
	decodeOptionalJSON(&d, &r.Parent)
	if format == runFormat2 {
		flags := d.uvarint()
		if flags&^(runFlagAwaitingSDK|runFlagExt) != 0 && d.err == nil {
			d.err = fmt.Errorf("unknown run flags %#x (written by a newer Duraton?)", flags)
		}
		r.AwaitingSDK = flags&runFlagAwaitingSDK != 0
		if flags&runFlagExt != 0 {
			var x *runExt
			decodeOptionalJSON(&d, &x)
			if x == nil && d.err == nil {
				d.err = fmt.Errorf("the run's extension is missing")
			}
			if x != nil && d.err == nil {
				d.err = x.applyTo(r)
			}
		}
	}
	if d.err == nil && d.pos != len(d.s) {
		d.err = fmt.Errorf("trailing bytes")
	}
	if d.err != nil {
		return fmt.Errorf("run record: format %d: %v", format, d.err)
	}
	return nil
}

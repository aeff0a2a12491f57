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
// HistoryLen and HistoryBytes are not part of it (they live in the run's cursor). Runs
// written before are JSON and start with '{'; they are still read. Another first byte
// is a later format, refused by name.
const runFormat1 = 0x01

func encodeRun(r *Run) ([]byte, error) {
	buf := make([]byte, 0, 128+len(r.Response)+len(r.URL)+len(r.ID))
	buf = append(buf, runFormat1)
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
	return appendOptionalJSON(buf, r.Parent)
}

// decodeRun reads a run record of either format into r (not its cursor).
func decodeRun(data []byte, r *Run) error {
	if len(data) == 0 {
		return fmt.Errorf("run record: empty")
	}
	switch data[0] {
	case '{':
		return json.Unmarshal(data, r) // written before format 1
	case runFormat1:
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
	if d.err == nil && d.pos != len(d.s) {
		d.err = fmt.Errorf("trailing bytes")
	}
	if d.err != nil {
		return fmt.Errorf("run record: format 1: %v", d.err)
	}
	return nil
}

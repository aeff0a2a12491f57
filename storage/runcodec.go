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
// Format 2 (0x02) is format 1 followed by a uvarint of flags (bit 0: AwaitingSDK);
// format 3 (0x03, written now) is format 2 followed by the workflow, app and event name and the run's
// error and cancel cause as optional JSON (rare). Format-1 and -2 records are still read.
//
// HistoryLen and HistoryBytes are not part of it (they live in the run's cursor). Runs
// written before are JSON and start with '{'; they are still read. Another first byte
// is a later format, refused by name.
const (
	runFormat1 = 0x01
	runFormat2 = 0x02
	runFormat3 = 0x03
)

func encodeRun(r *Run) ([]byte, error) {
	buf := make([]byte, 0, 128+len(r.Response)+len(r.URL)+len(r.ID))
	buf = append(buf, runFormat3)
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
	buf = binary.AppendUvarint(buf, runFlags(r))
	buf = appendString(appendString(appendString(buf, r.Workflow), r.App), r.EventName)
	if buf, err = appendOptionalJSON(buf, r.Error); err != nil {
		return nil, err
	}
	return appendOptionalJSON(buf, r.CancelledBy)
}

const runFlagAwaitingSDK = 1 << 0

func runFlags(r *Run) uint64 {
	var f uint64
	if r.AwaitingSDK {
		f |= runFlagAwaitingSDK
	}
	return f
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
	case runFormat1, runFormat2, runFormat3:
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
	if format >= runFormat2 {
		flags := d.uvarint()
		if flags&^runFlagAwaitingSDK != 0 && d.err == nil {
			d.err = fmt.Errorf("unknown run flags %#x (written by a newer Duraton?)", flags)
		}
		r.AwaitingSDK = flags&runFlagAwaitingSDK != 0
	}
	if format >= runFormat3 {
		r.Workflow, r.App, r.EventName = d.str(), d.str(), d.str()
		decodeOptionalJSON(&d, &r.Error)
		decodeOptionalJSON(&d, &r.CancelledBy)
	}
	if d.err == nil && d.pos != len(d.s) {
		d.err = fmt.Errorf("trailing bytes")
	}
	if d.err != nil {
		return fmt.Errorf("run record: format %d: %v", format, d.err)
	}
	return nil
}

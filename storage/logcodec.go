package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// Log events are written on every state change of every message (several per workflow
// step) and read only by the logs API, so, like messages, they have a compact binary
// record instead of JSON:
//
//	0x01 (format 1) ‖ uvarint len ‖ response body ‖ the strings of encodeLogEvent's order
//	as uvarint length ‖ bytes ‖ the integers as zigzag varints ‖ labels (count ‖ strings) ‖
//	response header (as appendHeader writes it)
//
// Records written before format 1 are JSON and start with '{'; they are still read. Any
// other first byte is a record of a later format, refused with an error that says so.
const logFormat1 = 0x01

// errLogFormat is a log record this version cannot read.
var errLogFormat = errors.New("log record")

// encodeLogEvent appends ev's format-1 record to buf.
func encodeLogEvent(buf []byte, ev *LogEvent) []byte {
	buf = append(buf, logFormat1)
	buf = appendBytes(buf, ev.ResponseBody)
	for _, s := range [...]string{ev.ID, ev.State, ev.MessageID, ev.URL, ev.Queue, ev.ScheduleID,
		ev.TopicName, ev.EndpointName, ev.Error} {
		buf = appendString(buf, s)
	}
	for _, n := range [...]int64{ev.Time, ev.NextDeliveryTime, int64(ev.ResponseStatus), int64(ev.Retried)} {
		buf = binary.AppendVarint(buf, n)
	}
	buf = binary.AppendUvarint(buf, uint64(len(ev.Labels)))
	for _, l := range ev.Labels {
		buf = appendString(buf, l)
	}
	return appendHeader(buf, ev.ResponseHeader)
}

// logEventSizeHint is about the size of ev's format-1 record.
func logEventSizeHint(ev *LogEvent) int {
	n := 48 + len(ev.ResponseBody) + len(ev.ID) + len(ev.State) + len(ev.MessageID) + len(ev.URL) +
		len(ev.Queue) + len(ev.ScheduleID) + len(ev.TopicName) + len(ev.EndpointName) + len(ev.Error)
	for _, l := range ev.Labels {
		n += len(l) + 2
	}
	for k, vs := range ev.ResponseHeader {
		n += len(k) + 2
		for _, v := range vs {
			n += len(v) + 2
		}
	}
	return n
}

// decodeLogEvent reads a log record of either format into ev.
func decodeLogEvent(data []byte, ev *LogEvent) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty", errLogFormat)
	}
	switch data[0] {
	case '{':
		return json.Unmarshal(data, ev) // written before format 1
	case logFormat1:
	default:
		return fmt.Errorf("%w: unknown format 0x%02x (written by a newer Duraton?)", errLogFormat, data[0])
	}
	d := decoder{b: data[1:]}
	if body := d.bytes(); len(body) > 0 {
		ev.ResponseBody = append([]byte(nil), body...) // bbolt's value lives in the mmap
	}
	d.s = string(d.b[d.pos:]) // one copy; the strings are slices of it
	d.b, d.pos = nil, 0
	for _, p := range [...]*string{&ev.ID, &ev.State, &ev.MessageID, &ev.URL, &ev.Queue, &ev.ScheduleID,
		&ev.TopicName, &ev.EndpointName, &ev.Error} {
		*p = d.str()
	}
	ev.Time, ev.NextDeliveryTime = d.varint(), d.varint()
	ev.ResponseStatus, ev.Retried = int(d.varint()), int(d.varint())
	if n := d.count(); n > 0 {
		ev.Labels = make([]string, n)
		for i := range ev.Labels {
			ev.Labels[i] = d.str()
		}
	}
	ev.ResponseHeader = d.header()
	if d.err == nil && d.pos != len(d.s) {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return fmt.Errorf("%w: format 1: %v", errLogFormat, d.err)
	}
	return nil
}

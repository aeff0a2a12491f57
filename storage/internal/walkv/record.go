package walkv

import "encoding/binary"

// The payload of a log record: what one commit changed, by bucket number. Replaying it
// into bbolt is recover.go's (replayer.apply).

// encode appends ops to p as a log record's payload. A bucket is named ('N': number,
// parent's number, name) before the first record of the segment that uses its number.
//
//	'P' bucket key value | 'D' bucket key | 'B' parent name  (numbers uvarint, bytes
//	length-prefixed)
func (e *Engine) encode(p []byte, ops []walOp) []byte {
	for _, op := range ops {
		p = e.define(p, op.id)
		switch op.kind {
		case entryValue:
			p = append(p, 'P')
			p = binary.AppendUvarint(p, uint64(op.id))
			p = appendBytes(p, op.key)
			p = appendBytes(p, op.val)
		case entryTombstone:
			p = append(p, 'D')
			p = binary.AppendUvarint(p, uint64(op.id))
			p = appendBytes(p, op.key)
		case entryBucket:
			p = append(p, 'B')
			p = binary.AppendUvarint(p, uint64(op.id))
			p = appendBytes(p, op.key)
		}
	}
	return p
}

func (e *Engine) define(p []byte, id uint32) []byte {
	if id == 0 || e.defined[id] || e.pending[id] {
		return p
	}
	path := e.reg.path(id)
	p = e.define(p, path.parent)
	p = append(p, 'N')
	p = binary.AppendUvarint(p, uint64(id))
	p = binary.AppendUvarint(p, uint64(path.parent))
	p = appendBytes(p, path.name)
	e.pending[id] = true
	return p
}

// appendBytes appends b to buf, length-prefixed (uvarint): the record's byte strings.
// (The store's codecs have the same helper; the log's format is its own.)
func appendBytes(buf, b []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...)
}

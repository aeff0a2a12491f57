package sched

import (
	"bytes"
	"encoding/hex"

	"github.com/duraton/duraton/storage"
)

// packedID holds a message id in 12 bytes instead of a 28-byte string behind a pointer:
// ids made by storage.IDGen are "msg_" and 24 hex digits. Any other id is kept in raw.
type packedID struct {
	b   [12]byte
	raw string
}

func packID(id string) packedID {
	var p packedID
	if len(id) == len(storage.PrefixMessage)+24 && id[:len(storage.PrefixMessage)] == storage.PrefixMessage {
		if _, err := hex.Decode(p.b[:], []byte(id[len(storage.PrefixMessage):])); err == nil {
			return p
		}
	}
	return packedID{raw: id}
}

func (p packedID) String() string {
	if p.raw != "" {
		return p.raw
	}
	return storage.PrefixMessage + hex.EncodeToString(p.b[:])
}

// less orders packed ids as their strings order: hex preserves byte order.
func (p packedID) less(q packedID) bool {
	if p.raw != "" || q.raw != "" {
		return p.String() < q.String()
	}
	return bytes.Compare(p.b[:], q.b[:]) < 0
}

package storage

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// IDGen makes time-ordered ids: prefix ‖ 16 hex digits of unix nanoseconds ‖ 8 hex digits
// of randomness. Ids of one generator strictly increase, so byte order is creation order,
// which is what keys the logs and the DLQ and what their cursors rely on.
type IDGen struct {
	mu   sync.Mutex
	last int64
	// pool holds random bytes read from crypto/rand a block at a time: an id takes 4 of
	// them, so most ids cost no system call. left is how many are unused.
	pool [512]byte
	left int
}

// New returns a new id with the given prefix (e.g. "msg_") made at now.
func (g *IDGen) New(prefix string, now time.Time) string {
	id, _ := g.NewAt(prefix, now)
	return id
}

// NewAt is New that also returns the time the id carries: now, or a little later when
// another id took that instant. A record keyed by the id and stamped with this time
// orders the same by key and by time (logs listed newest first rely on it).
func (g *IDGen) NewAt(prefix string, now time.Time) (string, time.Time) {
	var b [12]byte
	g.mu.Lock()
	n := now.UnixNano()
	if n <= g.last {
		n = g.last + 1
	}
	g.last = n
	if g.left < 4 {
		_, _ = rand.Read(g.pool[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
		g.left = len(g.pool)
	}
	copy(b[8:], g.pool[len(g.pool)-g.left:])
	g.left -= 4
	g.mu.Unlock()
	binary.BigEndian.PutUint64(b[:8], uint64(n))
	return prefix + hex.EncodeToString(b[:]), time.Unix(0, n)
}

// IDAt is the smallest id with the given prefix that a generator could make at t: every id
// made before t sorts below it. Retention sweeps use it as a cut-off.
func IDAt(prefix string, t time.Time) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixNano()))
	return prefix + hex.EncodeToString(b[:])
}

// Prefixes of the ids the store keys records by.
const (
	PrefixMessage = "msg_"
	PrefixLog     = "log_"
	PrefixDLQ     = "dlq_"
)

package pg

// A leader's Views read from its value cache (cache.go), so reading a delivery the leader
// has just written costs no round trip. A View uses a cached entry only when all of this
// holds:
//
//   - This process still holds the lease by its own monotonic clock: leaseUntil (when the
//     last successful TryLead or Renew was sent, plus the TTL) has not passed. Another
//     replica may take over, and then write, only once the lease has expired by the
//     database's clock (and the grace with it), which is later. A lease known lost
//     (Renew's ErrLeaseLost, a fenced Update, Resign) drops the cache at once.
//   - The entry agrees with what the View reads from the database. The View pins the
//     cache's commit count (seq) at its first read and holds the commit gate shared
//     until its snapshot is set (see unpin); a commit holds the gate exclusively from
//     its COMMIT until the cache has caught up (and counted it). So what the View reads
//     from the database is the state at the pinned seq, and it uses only entries put at
//     that seq or before: a newer one is read from the database.
//   - The entry is younger than Config.ViewCacheAge. One writer is not fenced:
//     `duraton tokens` on a running database (token records only, which the leader
//     writes at its first start only). What the leader cached of such a record is
//     trusted by a View for that long at most.

// viewCache returns the cache a View may read, nil when it may not (see above).
func (e *Engine) viewCache() *valueCache {
	c := e.cache.Load()
	if c == nil || e.clock() >= e.leaseUntil.Load() {
		return nil
	}
	return c
}

// dropCache forgets the cache once the lease is lost or given up: neither Views nor
// Updates read it again (a later Fence starts a new one).
func (e *Engine) dropCache() {
	e.leaseUntil.Store(0)
	e.cache.Store(nil)
}

// pin starts a View's use of the cache, at its first read.
func (t *tx) pin() {
	if t.vc == nil || t.pinned != pinNone {
		return
	}
	t.e.gate.RLock()
	t.pinned = pinHeld
	t.snap = t.vc.snapshot()
	t.since = t.e.clock() - int64(t.e.cfg.ViewCacheAge)
	t.ptx.alone = true
}

// unpin lets commits go on once the View's snapshot is set: by a statement of its
// transaction. Its first statement is sent alone, outside a transaction (no BEGIN, no
// ROLLBACK: most Views of the leader read the database once); the gate, held until
// the View ends or its second statement (sent with the BEGIN) has been answered,
// makes both of the same state, so no ROLLBACK is paid unless a second one is sent.
// (Only a write from outside the fence, `duraton tokens`, can land between the two.)
func (t *tx) unpin() {
	if t.pinned == pinHeld && t.ptx.begin == "" {
		t.release()
	}
}

// release ends the View's hold on the gate.
func (t *tx) release() {
	if t.pinned == pinHeld {
		t.e.gate.RUnlock()
		t.pinned = pinDone
	}
}

// viewGet returns a View's value of key from the cache, ok false when it must be read.
func (t *tx) viewGet(bucket int64, key []byte) (v []byte, present, ok bool) {
	if t.vc == nil {
		return nil, false, false
	}
	t.pin()
	if t.e.cache.Load() != t.vc || t.e.clock() >= t.e.leaseUntil.Load() {
		t.vc = nil // the lease ran out: the rest is read from the snapshot
		return nil, false, false
	}
	return t.vc.viewGet(bucket, key, t.snap, t.since)
}

// A View's use of the commit gate.
const (
	pinNone = iota // no read yet
	pinHeld        // gate held: the snapshot is not set yet
	pinDone        // snapshot set, gate released
)

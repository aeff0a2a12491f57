package sched

import "github.com/duraton/duraton/storage"

type gateKey struct{ project, queue string }

// QueueSettings are what a queue gate enforces.
type QueueSettings struct {
	Parallelism int // 0: no limit
	Paused      bool
}

// queueGate enforces one queue's parallelism and pause. As in QStash, a queue message
// holds its slot from its first attempt until it is delivered or fails for good, retries
// included, so the next message waits for the current one. Entries that cannot start
// wait in parked, in the order they became due.
type queueGate struct {
	QueueSettings
	holders   map[string]bool // ids of messages holding a slot
	parked    []storage.DueEntry
	parkedIDs map[string]struct{}
}

// ConfigureQueue applies a queue's settings (nil: the queue was deleted, and its
// messages go out without its limits) and releases what the change allows.
func (s *Scheduler) ConfigureQueue(project, name string, q *QueueSettings) {
	k := gateKey{project, name}
	g := s.gates[k]
	switch {
	case q == nil && g != nil:
		g.QueueSettings = QueueSettings{}
		s.unpark(g)
		delete(s.gates, k)
	case q != nil && g == nil:
		s.gates[k] = &queueGate{QueueSettings: *q, holders: map[string]bool{}, parkedIDs: map[string]struct{}{}}
	case q != nil:
		g.QueueSettings = *q
		s.unpark(g)
	}
}

// KnowsQueue reports whether the scheduler has the queue's settings.
func (s *Scheduler) KnowsQueue(project, name string) bool {
	_, ok := s.gates[gateKey{project, name}]
	return ok
}

// QueueLag is the number of a queue's messages parked or holding a slot.
func (s *Scheduler) QueueLag(project, name string) int {
	if g := s.gates[gateKey{project, name}]; g != nil {
		return len(g.parked) + len(g.holders)
	}
	return 0
}

// admitQueue takes a slot of the entry's queue, or parks the entry. A queue the
// scheduler was not told of does not exist (deleted): no limit applies.
func (s *Scheduler) admitQueue(e storage.DueEntry) bool {
	g := s.gates[gateKey{e.Project, e.Queue}]
	if g == nil || g.holders[e.MessageID] {
		return true // no such queue, or a retry of the message that holds the slot
	}
	if g.Paused || (g.Parallelism > 0 && len(g.holders) >= g.Parallelism) {
		g.parked = append(g.parked, e)
		g.parkedIDs[e.MessageID] = struct{}{}
		return false
	}
	g.holders[e.MessageID] = true
	return true
}

func (s *Scheduler) releaseQueueSlot(project, queue, messageID string) {
	if g := s.gates[gateKey{project, queue}]; g != nil && g.holders[messageID] {
		delete(g.holders, messageID)
		s.unpark(g)
	}
}

// unpark moves as many parked entries back to ready as the gate has free slots.
func (s *Scheduler) unpark(g *queueGate) {
	free := len(g.parked)
	if g.Paused {
		free = 0
	} else if g.Parallelism > 0 {
		free = max(0, min(free, g.Parallelism-len(g.holders)))
	}
	for _, e := range g.parked[:free] {
		delete(g.parkedIDs, e.MessageID)
		s.ready.ReplaceOrInsert(e)
	}
	g.parked = g.parked[free:]
}

// unpark removes one parked entry by message id.
func (g *queueGate) unpark(id string) (storage.DueEntry, bool) {
	if _, ok := g.parkedIDs[id]; !ok {
		return storage.DueEntry{}, false
	}
	delete(g.parkedIDs, id)
	for i, e := range g.parked {
		if e.MessageID == id {
			g.parked = append(g.parked[:i], g.parked[i+1:]...)
			return e, true
		}
	}
	return storage.DueEntry{}, false
}

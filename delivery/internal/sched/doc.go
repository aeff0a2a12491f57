// Package sched is the delivery engine's scheduler: a pure value that decides which due
// deliveries start and when. It holds the ready list (due entries in memory, bounded, the
// rest paged in from the durable due index), the queue gates (a queue's parallelism and
// pause), the flow-control waitlists (per key, with rate timers and the rings in which
// keys take turns at shared limits: the project ceiling and the engine's in-flight cap),
// and the accounting of carried message bodies.
//
// It has no goroutines, no locks, no store and no clock: every method takes `now`, and
// returns the starts and the wake-up it decided on. The caller (delivery's dispatcher)
// serialises calls, reads storage outside them (PageRequest → Paged), launches the
// starts, and reports each one back exactly once (Finish or Retry).
//
// Invariant (the paging rule): every durable due entry that the scheduler does not hold
// (in flight, waiting in a waitlist, parked at a queue gate, or backed off) is in the
// ready list, or has an index key above the watermark when the list is not complete.
//
// It is internal to delivery: only the engine's dispatcher uses it.
package sched

// Package native is Duraton's native-workflow unit (docs/protocol.md, "Native workflows"):
// apps and their workflow definitions, events, and the admission gates an event passes
// on its way to a run of each workflow it triggers.
//
// A native run is an ordinary workflow run: the event's transaction creates it through
// the engine (delivery.NativeUpdate), with the event as its initial payload, and the
// engine delivers it to the workflow's URL with the Upstash Workflow step protocol. The
// event, its fan-out, its gate states and the waiters it wakes are written in that one
// transaction, so an answered event is durable with everything it caused.
//
// Files: defs.go (apps and definitions), events.go (intake, fan-out, run payloads),
// gates.go (idempotency, rateLimit), buffers.go and flusher.go (debounce, batch and their
// durable deadlines; singleton at run creation), delayed.go and cron.go (delayed events
// and cron triggers: timers the flusher fires), runs.go and flowstate.go (the run
// routes, /runs/stats, /flow-state). The controls of a run's deliveries are enforced by
// the engine's scheduler (delivery/internal/sched), which admits a delivery over all of
// them at once: each concurrency scope is a flow-control key (the first the run's
// waitlist, a second a further key whose slot is admitted with it), priority shifts the
// run's place in its waitlist and its key's place in the rings, and throttle is a start
// gate on the run's first delivery, booked only when that delivery is admitted.
// tokenThrottle is a second start gate (a token bucket, tokens.go and
// delivery/internal/aimeter); cap is checked by the engine before each AI step
// (delivery/ai.go).
//
// It imports delivery (the engine and its transaction seam), storage (records),
// flowctl (controls, key paths, GCRA) and sdk/wire (header names). The server imports it.
package native

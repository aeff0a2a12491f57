// Package native is Duraton's native-workflow unit (native-api.md, flow-control.md §B):
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
// durable deadlines; singleton and throttle at run creation), runs.go and flowstate.go
// (the run routes, /runs/stats, /flow-state). Concurrency (one scope) is a flow-control
// key on the run and priority a shift of its waitlist order, both enforced by the
// engine's scheduler. cap and tokenThrottle are stored for the AI-spend work.
//
// It imports delivery (the engine and its transaction seam), storage (records),
// flowctl (controls, key paths, GCRA) and sdk/wire (header names). The server imports it.
package native

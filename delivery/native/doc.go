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
// Built so far: definitions (every control accepted, validated and stored), events with
// dedupeId, fan-out, the idempotency and rateLimit gates, waking waitForEvent waiters.
// Not yet: debounce, batch, singleton, throttle, concurrency, priority (stored, not
// enforced), cap and tokenThrottle (stored for the AI-spend work).
//
// It imports delivery (the engine and its transaction seam), storage (records),
// flowctl (controls, key paths, GCRA) and sdk/wire (header names). The server imports it.
package native

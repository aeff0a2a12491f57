// Package delivery is Duraton's engine: it accepts messages (Publish), keeps the due ones
// moving (the dispatcher), admits them through flow control (per-key waitlists, rate
// windows, parallelism slots, the project ceiling), signs and sends each attempt,
// classifies the answer, and records the outcome together with whatever follows it
// (retry, callback, failure callback, dead letter) in one storage transaction. Workflow
// runs live here too: run creation and history (workflow*.go), waits and notifies
// (waiters.go), run ends and parent resumption (workflow_end.go).
//
// It imports storage (records and transactions), flowctl (configuration types), sdk/wire
// (header names and signing) and its own sub-packages retrydelay (the Upstash-Retry-Delay
// evaluator) and netguard (the SSRF-safe dialer). It never imports server.
//
// Delivery is at least once. The due index in storage is the durable outbox: an entry is
// removed only by the transaction that records its attempt's outcome, so a crash at any
// point leaves it in place and it is sent again after restart, without spending a retry
// (the attempt counter moves only when an outcome is recorded). Recorded outcomes are
// compare-and-set on the message's due time, so a late answer from an abandoned attempt
// cannot overwrite newer state.
//
// Lifecycle: New, then Start(ctx) loads the due index and starts the dispatcher; Stop
// stops dispatching, waits for in-flight attempts up to Config.DrainTimeout, cancels the
// rest (they are redelivered on the next start) and returns. The caller closes the store
// after Stop.
package delivery

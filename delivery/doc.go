// Package delivery is Duraton's engine: it accepts messages (Publish), keeps the due ones
// moving, signs and sends each attempt, classifies the answer, and records the outcome
// together with whatever follows it (retry, callback, failure callback, dead letter) in
// one storage transaction. It is made of separate units:
//
//   - messages: publish.go (intake), attempt.go and send.go (one attempt: read, make the
//     rate start durable, sign, send, classify), workers.go (the goroutines attempts run
//     on, kept for the next one), outcome.go (record an outcome), inline.go (an
//     endpoint's inline answer: its steps or its run's end, stored with the outcome),
//     early.go (the outcome of a run's only delivery in flight, stored with the step it
//     publishes), manage.go (cancel, DLQ, queues, retention sweep);
//   - the dispatcher (dispatch.go): a thin loop around the pure scheduler of package
//     internal/sched (ready list, paging, queue gates, flow-control waitlists, rings,
//     timers), which reads storage outside its lock and launches the starts the
//     scheduler makes;
//   - workflow runs (runs.go, workflow*.go, waiters.go, webhooks.go): run creation and
//     history, steps, waits and notifies, ends and parent resumption. The message engine
//     reaches them only through the runHooks interface, inside its own transactions;
//   - AI metering (ai.go over package internal/aimeter): an AI step's usage and price,
//     the run's cap checked before the call leaves, the tokenThrottle buckets;
//   - reads for the console and the native API (console_reads.go, native_reads.go) and
//     management (manage.go, flow_manage.go, workflow_manage.go).
//
// Writes go through update (tx.go): a transaction function may run more than once under
// group commit, so it returns what it made (and the effects for the scheduler: due
// entries to add, entries to forget) and changes nothing outside the transaction. A test
// enforces that nothing else in the package calls Store.Update.
//
// It imports storage (records and transactions), flowctl (configuration types), sdk/wire
// (the protocol) and its sub-packages internal/sched, internal/aimeter, internal/h1 (the
// HTTP/1.1 client of plain http:// deliveries), retrydelay and netguard. It never imports
// server. What is not API lives under internal/; the rest of its sub-packages (native,
// schedule, urlgroup, netguard, retrydelay, deliverytest) are imported by server and cmd.
//
// Delivery is at least once. The due index in storage is the durable outbox: an entry is
// removed only by the transaction that records its attempt's outcome, so a crash at any
// point leaves it in place and it is sent again after restart, without spending a retry
// (the attempt counter moves only when an outcome is recorded). Recorded outcomes are
// compare-and-set on the message's due time, so a late answer from an abandoned attempt
// cannot overwrite newer state. Nothing is dropped on a storage error: an outcome that
// cannot be recorded is tried again, then the delivery is sent again later.
//
// Lifecycle: New, then Start(ctx) loads the scheduler's state and starts the dispatcher;
// Stop stops dispatching, waits for in-flight attempts up to Config.DrainTimeout, cancels
// the rest (they are redelivered on the next start), ends the idle attempt workers and
// returns. The caller closes the store after Stop.
package delivery

// Package sdk is the Go SDK of Duraton, a self-hosted QStash / Upstash Workflow compatible
// server. It speaks the same wire protocol as the official TypeScript SDKs
// (@upstash/qstash and @upstash/workflow), so it works against Duraton and against any
// server that speaks that protocol.
//
// It offers:
//
//   - Client: publish messages (Publish, PublishJSON, Batch, Enqueue), read and cancel
//     messages, the dead-letter queue, logs, queues, flow-control keys, and the workflow
//     API: Trigger a run, Notify waiting runs, Cancel runs, read RunLogs, and resume or
//     restart runs from the workflow DLQ. NewClient reads DURATON_URL and DURATON_TOKEN
//     (else QSTASH_URL and QSTASH_TOKEN).
//   - Receiver: verifies the Upstash-Signature of a delivery (current and next signing key,
//     for key rotation). NewReceiverFromEnv reads QSTASH_CURRENT_SIGNING_KEY and
//     QSTASH_NEXT_SIGNING_KEY.
//   - The workflow serve handler (an http.Handler) and its step Context.
//   - Native workflows (Duraton's own API): Workflow definitions with their flow controls
//     and handlers, App (one http.Handler for an app's workflows), Client.RegisterApp,
//     Client.SendEvent(s), and Context.Event / Events in a run started by an event.
//
// Every call that does I/O takes a context.Context first. A non-2xx answer of the server is
// returned as *APIError, which keeps the HTTP status (errors.As, IsNotFound).
//
// Import rule: sdk imports only the standard library, github.com/golang-jwt/jwt/v5 (through
// sdk/wire) and sdk/wire itself. It must never import a server-side package of Duraton
// (server, delivery, storage, flowctl, cmd) nor their dependencies (echo, bbolt), so a user
// of the SDK never pulls in the server; deps_test.go enforces this.
package sdk

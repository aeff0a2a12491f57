// Package wire is the Upstash/QStash wire protocol, once, for the Duraton server and the
// Go SDK: header names and values (headers.go), the Upstash-Flow-Control-Value format,
// parsed and rendered (flowcontrol.go), the JSON the API answers and the SDK decodes
// (messages.go: messages, logs, dead letters, queues, flow-control info; runs.go: run
// history, run logs, workflow dead letters, waiters; callback.go: the callback and
// failure-callback payload), JSON.stringify-compatible encoding (json.go), the hop-by-hop
// header list, and the signature (an HS256 JWT over the delivered body) and its
// verification. It exists exactly once so the server and the SDK cannot drift apart; the
// SDK re-exports its JSON types under the same names.
//
// Limits (largest parallelism, period range, body sizes) are the server's policy, not the
// format's, and stay in the server's packages.
//
// wire imports only the standard library and golang-jwt (TestDeps); it must never import
// a server-side package (server, delivery, storage, flowctl, cmd).
package wire

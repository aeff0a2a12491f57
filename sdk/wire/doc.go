// Package wire holds the Upstash/QStash wire protocol shared by the Duraton server and the
// Go SDK: header names, the signature (an HS256 JWT over the delivered body) and its
// verification. It exists exactly once so the server and the SDK cannot drift apart.
//
// wire imports only the standard library and golang-jwt; it must never import a
// server-side package (server, delivery, storage, flowctl, cmd).
package wire

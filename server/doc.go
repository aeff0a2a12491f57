// Package server is Duraton's HTTP face: the QStash-compatible /v2 API on labstack/echo.
// Handlers are split by resource (publish, messages, logs, dlq, queues, keys, workflows,
// workflow logs and DLQ, flow control), each a small struct holding only the engine
// methods it calls. One place (errors.go) turns errors into an
// HTTP status and the JSON body {"error": "..."}.
//
// server imports delivery (the engine and its record types), flowctl (to parse
// flow-control headers), sdk/wire (header names) and delivery/netguard and
// delivery/retrydelay (to validate destinations and retry-delay expressions at publish
// time). It does not touch storage directly: every read and write goes through the
// engine, so there is one owner of the state machine. (The sub-package servertest, which
// wires a whole in-process Duraton for other packages' tests, is the exception: like
// cmd/duraton it opens a store.)
package server

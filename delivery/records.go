package delivery

import (
	"time"

	"github.com/duraton/duraton/storage"
)

// Record types of the engine's API. They are the storage records, re-exported so the HTTP
// layer talks to the engine alone (server → delivery → storage: docs/architecture.md,
// "Import rules and why").
type (
	Message      = storage.Message
	CallbackSpec = storage.CallbackSpec
	LogEvent     = storage.LogEvent
	DLQEntry     = storage.DLQEntry
	Queue        = storage.Queue
	Project      = storage.Project
	Response     = storage.Response
	Redaction    = storage.Redaction
)

// Message states and kinds, re-exported from storage.
const (
	StateCreated   = storage.StateCreated
	StateRetry     = storage.StateRetry
	StateDelivered = storage.StateDelivered
	StateError     = storage.StateError
	StateFailed    = storage.StateFailed
	StateCancelled = storage.StateCancelled

	KindMessage         = storage.KindMessage
	KindCallback        = storage.KindCallback
	KindFailureCallback = storage.KindFailureCallback
)

// ErrNotFound is returned for a message, dead letter, queue or project that does not
// exist in the caller's project.
var ErrNotFound = storage.ErrNotFound

// Id prefixes, for cursors.
const (
	PrefixMessage = storage.PrefixMessage
	PrefixLog     = storage.PrefixLog
	PrefixDLQ     = storage.PrefixDLQ
)

// IDAt is the smallest id with prefix made at t; see storage.IDAt.
func IDAt(prefix string, t time.Time) string { return storage.IDAt(prefix, t) }

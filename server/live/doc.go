// Package live serves the live run streams: Server-Sent Events of one run's changes
// (GET /runs/{id}/events) and of a project's run status changes (GET /runs/stream),
// for API clients and for the console.
//
// The Hub is the engine's delivery.RunWatcher: after each commit it hears which runs
// changed, and wakes the streams that show them. A stream reads what it shows from the
// store (the same views as GET /runs/{id}), so a notification carries no data and a
// burst of changes to one run coalesces into one read. Every bound is explicit: the
// number of streams (Config.MaxStreams), the changes queued for one project stream
// (Config.Buffer: a stream that falls further behind is ended, and its client resumes),
// and the changes remembered for resuming (Config.Ring).
//
// Resuming (Last-Event-ID): a run stream's event id is the number of steps sent and the
// status shown, so a reconnect sends only the steps after those, then the status when it
// changed, and carries on: steps are append-only, so nothing is lost or repeated. A
// project stream's id is a position in the hub's memory of recent changes: a reconnect
// within it sends the current status of every run changed since (a run that changed
// twice is sent once, as it is now); a reconnect from further back, from before the
// server started, or across a time nobody was watching gets a `reset` event: reload
// the list, then follow the stream.
package live

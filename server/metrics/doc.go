// Package metrics holds Duraton's Prometheus collectors and the /metrics handler.
//
// Metrics implements delivery.Observer: the engine tells it what happened (messages
// published, attempts and their latency, outcomes recorded, runs started and ended),
// always after the commit, so a transaction that runs twice counts once. Gauges are read
// at scrape time: the engine's load (Engine.Stats: in flight, waitlists by reason) and
// the data file's size. The store's group committer reports each commit's size and
// duration through the OnCommit function (storage.Options.OnCommit).
//
// Every label comes from a small fixed set (an outcome, a reason class, a run state):
// never a project, a flow-control key, a URL or an id, so the number of series is
// bounded whatever the traffic.
//
// It imports delivery (the Observer contract, Stats and label values) and
// prometheus/client_golang. It is wired by hand in cmd/duraton.
package metrics

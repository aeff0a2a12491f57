// Package storage owns Duraton's durable state: every project's messages, the global due
// index, runs and their histories, logs, dead letters, queues, deduplication records,
// API tokens and signing keys, as domain records (the Store and its Tx) over a small
// key-value engine seam (storage/kv: Engine, Tx, Bucket, Cursor).
//
// This package holds the domain store: the records and their codecs (records.go, runs.go,
// *codec.go), the Tx methods, group commit (commit.go, commit_undo.go), the sweeps
// (sweep.go), and the orchestration of backups and checks (backup.go, check.go, log.go).
// The engines sit behind the seam, each in its own package:
//
//   - the embedded default (Open): one bbolt file (storage/internal/boltkv, which also
//     refuses a damaged file before bbolt maps it) written through a write-ahead log
//     (storage/internal/walkv: the overlay, the merge cursor, recovery, checkpoints; the
//     log's segment format and files are storage/internal/wal, behind a filesystem
//     seam). A commit is answered once its log record is fdatasynced; checkpoints move
//     the log into the bbolt file in the background; start-up replays what the file has
//     not taken, and refuses a damaged log or data file instead of guessing;
//   - PostgreSQL (storage/pg, through OpenEngine), for replicas: a commit is a
//     PostgreSQL transaction.
//
// The domain code, the codecs and the shared behaviour suite (storage/storagetest) are
// the same for both. Layout (bucket names in quotes; on PostgreSQL the same keys):
//
//	"tokens"   sha256(token) hex → project id
//	"due"      due time (unix ns, 8 bytes big-endian) ‖ message id → project, queue,
//	           flow-control key and limits, order, timer flag (see due.go)
//	"projects" / <project id> /
//	    "meta"     the Project record under key "project"; "sweepindexes" once the
//	               two indexes below are built for the project (sweep.go)
//	    "messages" message id → Message (pending only; delivered ones are removed)
//	    "logs"     log id (time ordered) → LogEvent (binary, see logcodec.go; JSON before)
//	    "dlq"      dlq id (time ordered) → DLQEntry
//	    "queues"   queue name → Queue
//	    "dedup"    deduplication id → DedupRecord
//	    "dedupexpiry" expiry (unix ms) ‖ dedup id → nothing (the sweep's index)
//	    "runs"     workflow run id → Run (its configuration and state)
//	    "rundata"  run id 0x00 kind … → a run's history entries, step keys, pending
//	               messages and cursor, its webhooks (secret) and the events kept
//	               for a later wait (arrival time ‖ data), contiguous per run (see
//	               runs.go, events.go)
//	    "eventexpiry" arrival (unix ms) ‖ run id 0x00 event id → nothing (expiry
//	               index of kept events)
//	    "runindex" created-at ‖ run id → nothing (listing newest first)
//	    "runended" ended-at (unix ms) ‖ run id → nothing (the sweep's index of ended runs)
//	    "runsearch" kind ‖ uvarint len ‖ value ‖ created-at ‖ run id → nothing
//	               (the search index of runs by workflow, app, event name, label)
//	    "waiters"  event id 0x00 run id → Waiter
//	    "lookback" run id 0x00 event id → event data, written by versions before
//	               kept events had limits; the sweeper moves them into "rundata"
//	    "ratelog"  flow-control key 0x00 start (unix ns) → nothing (recent rate starts)
//	    "flowkeys" flow-control key → FlowKeySettings (pause, pins)
//	    "schedules" schedule id → Schedule (cron, message template, durable next tick)
//	    "topics"   URL group name → Topic (its endpoints)
//
// Values are JSON except the hottest records: messages, runs and history entries are
// binary, starting with a format byte (runs 0x02, the others 0x01; msgcodec.go,
// runcodec.go, histcodec.go).
// JSON records of those kinds written by earlier versions are still read; a record of
// an unknown format is refused with an error that says so.
//
// Every record of a project lives under that project's bucket, so a lookup can only see
// its own project's data. The due index is global because the dispatcher serves every
// project; its values name the project.
//
// Writes go through Store.Update, which group-commits: concurrent callers share one
// engine transaction (one log record and one fdatasync on the embedded engine), and each
// returns only after that commit is durable. Unlike
// bbolt's DB.Batch there is no timer: a commit starts as soon as the previous one ends,
// taking everything that queued up meanwhile. Update functions may run more than once (if
// another function in the same group fails, the group is made again without it, once,
// undoing in place any function that fails then: commit_undo.go) and must therefore have
// no side effects outside the transaction.
//
// The other records are JSON; enums are stored as their names. storage imports flowctl
// only for the types it persists.
package storage

// Package walkv is the embedded engine: a bbolt file (storage/internal/boltkv) written
// through a write-ahead log (storage/internal/wal), behind the engine seam (storage/kv).
//
// A commit is one record appended to the log and one fdatasync; what it wrote goes to an
// overlay in memory (overlay.go) that reads see above bbolt, through a merge cursor
// (cursor.go). Checkpoints move the overlay into bbolt in one ordinary bbolt transaction
// (engine.go); Open replays what the file has not taken and refuses a log that is damaged
// or belongs to another file (recover.go). CheckLog and DropLogAfter (drop.go) are the
// operator's tools for a damaged log.
//
// What it exports is what the store needs: Open and Config, the Engine (a kv.Engine,
// plus Checkpoint for backups, Stats, and Crash for tests), MaxCommitBytes and its error,
// Remove, and the log-damage tools. Package storage re-exports the parts its callers use.
package walkv

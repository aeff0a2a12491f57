// Package wal owns the files of the write-ahead log in front of the bbolt data file: the
// segment format, appending a record durably, and reading a segment back while telling an
// interrupted commit from damage. What a record means (the engine's operations) and
// replaying it into bbolt belong to the storage package.
//
// A segment is a header and then records, one per committed transaction, written in place
// into space zero-filled (and synced) ahead of them: overwriting allocated blocks, a sync
// flushes the data alone, not the file's size.
//
//	header: "DWAL0001" | epoch [16]byte | base txid uint64 | crc32c of the 32 bytes before
//	record: length uint32 | crc32c(segment number, payload) uint32 | payload
//
// # What it guarantees
//
//   - A record Append returned nil for is on disk (fdatasync) before Append returns: a
//     crash at any point after keeps it, byte for byte.
//   - A record Append failed for is not replayed, whole or in part, unless the failure
//     was fatal (a failed sync, or a failed write that could not be zeroed again). After a
//     fatal failure the segment is not written to again: what the file holds is unknown,
//     and the record may or may not come back after a restart (never half of it).
//   - Only the last record of the last segment can be incomplete after a crash, since
//     every record is synced before the next is written. Read drops such a record (it was
//     never acknowledged) and reports it (Contents.Torn).
//   - Anything else that is not a valid record is damage: a bad record in a segment
//     before the last, a bad record followed by a valid one (the scan looks for one at
//     every offset after it), a bad header. Read returns a DamageError naming the file
//     and the offset and changes nothing; going on without the damaged tail is an
//     operator's explicit choice (Truncate). Damage to the very last record looks exactly
//     like an interrupted commit and is dropped as one: no format without a second copy
//     can tell them apart.
//   - A record's checksum is seeded with its segment's number, and numbers never repeat
//     for a data file (the storage package keeps the highest in the data file), so
//     nothing of an older file can pass for a record of a newer one.
//   - A segment's header names the data file (epoch) and the data file's transaction its
//     records apply on top of: the storage package refuses a log over a data file it
//     does not belong to.
//
// Every filesystem call goes through FS, so that tests can fail any call or crash after
// it (waltest): the crash-point suite in the storage package runs a workload of commits
// against every such point and checks the guarantees above.
package wal

// Package ledger is Signet's decision log: an append-only, hash-chained, durable record of
// every issuance and refusal. It is the audit trail (rule 5), the gate of rule 4 (no ledger
// record, no certificate: Append returns only after the record is fsynced, and any write or
// sync failure closes the ledger for appends) and the archive from which idempotent answers
// are rebuilt after a restart (rule 3: issued records carry the certificate chain).
//
// # On-disk layout
//
// A ledger is a directory (mode 0700) holding:
//
//   - ledger-000001.jsonl, ledger-000002.jsonl, …: the segments (segments.go). The last one
//     (mode 0600) is appended to: the records, then free space, a run of zero (NUL) bytes. A
//     closed one (mode 0400) holds only records and never changes; the first record of each
//     segment chains to the last one of the segment before.
//   - index.db: the index (package index, bbolt): where each record lies, the records of each
//     serial and object UID, the state records with their lines, each signer's and CA's latest
//     NotAfter, and the last indexed record. Written in the background (indexer.go).
//   - tiles/: the Merkle tree of the records as C2SP tlog-tiles (ledgerproof.OpenTiles), its
//     full tiles written before the index records the size they cover.
//   - FORMAT: the layout's version (start.go). index.db and tiles/ are derived from the
//     segments and rebuilt from them when missing or when they do not match (Reindex).
//   - LOCK: an empty file held with flock(LOCK_EX) by the one Ledger that may append, so a
//     second server (or a second Open in the same process) cannot interleave records.
//
// Open reads the last indexed record, the tree's right edge, the state records, the records
// of the idempotency window and those written after the last index write, never the whole
// history (start.go has the details).
//
// # Free space
//
// The Ledger writes each batch with one pwrite into the free space just after the last record,
// then fsyncs. The free space was written with zeros (and fsynced) beforehand, so the batch
// overwrites allocated, written blocks without changing the file's size or extents, and its
// fsync has data blocks to flush and no allocation to commit, which about halves the latency
// of a one-record append (docs/benchmarks.md has the measurement). fdatasync would be as
// durable here, the size and extents being unchanged, but measured no faster than fsync, so
// Sync stays fsync.
//
// When a batch would not fit, the writer first grows the segment with zeros to the next
// multiple of Options.Preallocate (4 MiB by default; as many chunks as a big batch needs) and
// fsyncs; Open does the same when less than a quarter chunk is free, which gives a ledger
// written before free space existed its first chunk. The zeros are written, never fallocated:
// the first write into a fallocated (unwritten) extent converts it, a metadata change that
// costs the journal commit the free space avoids. A batch of more than 1 MiB of records is
// written as several writes of at most 1 MiB, each fsynced before the next, and a single
// record's line may not exceed 1 MiB; so at any time at most one write, of at most 1 MiB, is
// unacknowledged. An older signet-server opening the ledger takes the free space for a torn
// tail and truncates it; this one adds it back.
//
// Growth fits what is free (space.go). On Linux the writer first asks the file system for its
// free space (statfs) and always leaves 64 KiB of it for the checkpoint and the server's other
// small writes; when the chunk does not fit, the segment grows by as much as does, down to
// what the batch needs rounded up to a 4 KiB page. When not even that fits, nothing is
// written: the batch fails with a *SpaceError that says how many bytes are free and needed
// (Ledger.SpaceNeeded is the difference). Where the free space is not known (other
// platforms) the write finds out: an extension refused with ENOSPC is tried again with what
// the batch needs. Every extension that fails is given back: the segment is truncated to its
// size before the attempt and fsynced, so no partial chunk keeps holding the space (on a
// volume smaller than two chunks, a kept partial chunk made a full disk permanent). Open
// never fails for lack of space: it opens with the free space the segment has, and warns.
//
// # Framing and canonical encoding
//
// Each record is one line: the canonical JSON encoding of Record followed by "\n". The
// canonical encoding is what encoding/json's Marshal produces for Record (fields in the struct's
// declaration order, no insignificant whitespace, HTML characters escaped, strings made valid
// UTF-8 first, times in RFC 3339 with nanoseconds in UTC, empty optional fields omitted). JSON
// never emits a raw newline, so a line is exactly one record. A refusal looks like this (one
// line on disk):
//
//	{"seq":7,"time":"2026-11-21T10:00:07Z","decision":"refused","signer":"example.com/serving",
//	 "client":"spiffe://signet/watcher","requester":"mallory","objectUID":"9a2e",
//	 "objectKind":"CertificateSigningRequest","reason":"POLICY_VIOLATION",
//	 "message":"group system:masters is forbidden","prevHash":"f556b283…","hash":"c3efc397…"}
//
// The ledger stores what it is given; its callers bound it. The signing service clips every
// caller-supplied string in a record (decision's clip: a value whose encoding exceeds its
// bound keeps a prefix and names its length and SHA-256), so a refused record's line is at
// most 8 KiB whatever a caller sends (6,406 bytes in the worst case measured,
// signerapi.TestRefusedRecordIsBounded; docs/security.md), and an issued record is bounded by
// the request limits and the signer's chain. A line over 1 MiB is refused (ErrInvalidRecord).
//
// A record's Hash is the lower-case hex SHA-256 of its canonical encoding with Hash empty (the
// field is then omitted, so the hashed bytes are the stored line minus its "hash" member).
// PrevHash is the previous record's Hash: the hash chains the records, and the first record's
// PrevHash is 64 zeros. Seq starts at 1 and increases by one per record. Verify rejects a line
// that is not byte-for-byte the canonical encoding of the record it decodes to.
//
// # Recovery
//
// Records are acknowledged only after the write holding them, newlines included, is fsynced.
// What follows the last complete line is the tail:
//
//   - only zeros: free space, the normal state (Report.FreeSpace).
//   - non-zero bytes, all within 1 MiB of the last complete line: a torn tail
//     (Report.TornTail, counted up to its last non-zero byte), what a crash left of the one
//     unacknowledged write. It may be an unterminated line, followed by zeros or not (a
//     ledger without free space ends with it), but also any mix of that write's bytes and the
//     zeros they replaced: an overwrite in place reaches the disk block by block in no set
//     order, so a later block can be there without an earlier one, and a line holding a zero
//     byte or complete lines after zeros belong to the torn write too (records never contain
//     a zero byte: JSON escapes it). Open truncates the tail with a warning (and then restores
//     the free space); Verify reports it without failing.
//   - a non-zero byte after a zero byte and 1 MiB or more past the last complete line: no
//     write of the ledger reaches there, so it was written by something else. Open refuses
//     and Verify reports it, with its line and offset, like any other defect.
//
// Complete but unacknowledged lines of a batch cut short by a crash, before its first zero
// byte, are valid records and stay: the decision they record was made, only its answer was
// lost, and a retry gets the same certificate back through idempotency. Every other defect (a
// changed, removed, inserted or reordered record) makes Verify report the first problem with
// file, line, offset and seq; Open refuses it when it reads the record (the end of the ledger,
// the window, or the whole history when it rebuilds the index), and Line refuses a record that
// is not its leaf in the tree. The 1 MiB of a possible torn write is also
// the limit of what the zeros cannot tell apart: acknowledged records within 1 MiB of the end
// that were zeroed (by a failing disk or by hand) look like a torn write, and Open drops the
// records after them as it would drop those of one. That is no worse than removing records
// from the end (below).
//
// Verify and Replay read without the lock while a Ledger appends: a write in progress shows
// as a torn tail and is skipped. A reader that read the free space at the last complete line
// before a write landed there, and then later writes far beyond it, reads again from that
// line before it reports data in the free space: the writer completes each write before it
// starts the next, so on that second read the earlier writes are there.
//
// These rules assume a file system that, after a crash, shows each block of the file either
// as last written or as before (ext4 in its default data=ordered mode, xfs, btrfs); one that
// can expose stale blocks (ext4 data=writeback) may show garbage in free space whose
// extension a crash cut short, and Open then refuses the ledger.
//
// # Storage faults
//
// A failed write or fsync closes the ledger for appends (nothing is acknowledged after a
// batch that may be partial). Every Options.RecoverInterval it then tries to recover: it
// zeroes what the failed writes may have left after the last acknowledged record (those
// records' callers were told nothing was issued, so they never join the history), makes sure
// there is free space again by the rules above (room for the batch that failed, and up to a
// chunk if the file system has it), fsyncs, and reopens. A disk that was full and has space
// again, or a storage error that went away, needs no restart; while the disk is still too
// full, Err says how many bytes are free and needed, as of the last attempt. The writer also checks (at most every
// 50 ms, and every RecoverInterval when idle) that the segment's path still names the file
// being appended to: a removed segment is restored from the open file (no record lost); a
// file put in its place is left alone, the ledger's own records are kept next to it, and the
// ledger stays closed with ErrRestartRequired. recover.go has the details.
//
// Removing records from the end of the ledger cannot be detected from the ledger alone. The
// acknowledged records are the leaves of a Merkle tree (tree.go, ledgerproof); the server signs
// checkpoints of it (server/checkpoint), keeps the latest next to the segment, refuses to start
// on a ledger that does not extend it, and the watchers witness them in their clusters
// (docs/ledger.md).
package ledger

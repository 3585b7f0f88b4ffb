// Package index is the ledger's embedded index: one bbolt file beside the segments that
// answers, without reading the ledger's history, where a record's line lies (Pos), which
// records hold a certificate serial (BySerial) or an object UID (ByObjectUID), the first
// record at or after a time (FirstSince), which records rebuild server state
// (StateSeqs, StateRecords with their lines) and each signer's and CA's latest NotAfter
// (LatestLeaves). Meta says how far it got: the last indexed seq and hash and the Merkle tree
// size the ledger gave with it, so that a start reads the meta and the records after it,
// never the whole history.
//
// The index knows nothing of records or segments beyond Entry (it does not import the
// ledger, which imports it). The ledger feeds it in batches (Add: consecutive seqs, one
// durable transaction each) and queries it. Open reads the layout version and nothing else.
//
// # Buckets
//
// All integers are big-endian in keys (so keys sort as numbers) and uvarints or varints in
// values, unless said otherwise.
//
//   - meta: layout (2), seq, hash, tree (Meta), format (SetFormat), maxtime (the latest Time
//     indexed, as a since key; absent when empty), secret (16 random bytes made with the
//     file: the key of the id hash), nextrun (the number the next run takes).
//   - pos: block number (8 bytes) → the entries of seqs b*64+1 … b*64+64 one after another:
//     a flags byte (State; a segment follows; an offset follows), the segment if it changed,
//     the offset unless the line starts just after the previous one's newline (or at 0 in a
//     new segment), the length, the time as a difference in nanoseconds from the previous
//     entry's. About 8 bytes a record. Appended at the end, pages filled full.
//   - since: a time (nanoseconds since 1970 with the sign bit flipped, 8 bytes) → a block
//     number (8 bytes). A block has a key when its latest time is later than every time in
//     the blocks before it, and the key is that time. The first record at or after t is then
//     in the block of the first key ≥ t (the blocks before it have only earlier times, and
//     it has a later one), and FirstSince seeks that key and reads that block: exact and
//     O(log n) whatever steps back the clock took. About one key a block.
//   - state: seq (8 bytes) → the record's line, for State entries: a start replays them from
//     here, even when their segment was moved to archive storage.
//   - leaves: uvarint-length-prefixed signer and CA → the latest NotAfter issued (Unix
//     nanoseconds) and its seq, 8 bytes each.
//   - serial.runs, uid.runs and serial.blocks, uid.blocks: the id lookups, each an LSM tree
//     of sorted runs (runs.go, compact.go). An id is a uvarint tag (byte count × 2, plus 1
//     for a UUID) then the bytes: for a serial, the number's big-endian bytes
//     (NormalizeSerial, so "0x0A" and "a" are one serial); for a UID, the 16 bytes of a
//     canonical lower-case UUID, or else the UID's bytes as they are. Its hash is the first
//     8 bytes of SHA-256(secret ‖ id), keyed so that callers who choose UIDs cannot aim
//     them at one hash. A run is its entries (hash, seq, id) sorted by hash then seq, in
//     blocks of about 4,000 bytes keyed run number ‖ hash ‖ seq of the block's last entry;
//     the runs bucket lists the runs (run number → level and entry count). Each Add writes
//     its ids as one new run of level 0, at the end of the key space; Compact merges
//     fanout (4) runs of one level into one of the next, a bounded step per transaction,
//     and deletes the merged runs' blocks. A lookup reads, in each listed run, the block
//     where the id's hash would lie, and compares ids whole, so "ab" never matches "abc"
//     and any bytes (NUL, 0xff, 4 KiB) work: at most three runs a level, O(log n) levels.
//     What an Add writes is proportional to its batch: the hash-table groups of layout 1
//     made each Add rewrite the pages its ids fell in, most of the file at 10 M records.
//
// # Durability and concurrency
//
// Add, SetFormat and each Compact step are each one bbolt transaction, fsynced before they
// return (unless Options.NoSync); bbolt's copy-on-write pages keep the file consistent
// through a crash, and a transaction that fails stores nothing. The methods of an Index are
// safe for concurrent use: readers see the last committed transaction. The file is locked
// with flock: exclusively by a writer, shared by read-only Indexes, so a second writer, or
// a reader while the writer holds it, fails with ErrLocked after Options.Timeout.
package index

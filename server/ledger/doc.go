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
//   - ledger-000001.jsonl: the segment, mode 0600, opened O_APPEND. Only one segment exists
//     today; rotation into ledger-000002.jsonl, … (each segment's first record chaining to the
//     previous segment's last) is future work, and the numbered name keeps room for it.
//   - LOCK: an empty file held with flock(LOCK_EX) by the one Ledger that may append, so a
//     second server (or a second Open in the same process) cannot interleave records.
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
// A record's Hash is the lower-case hex SHA-256 of its canonical encoding with Hash empty (the
// field is then omitted, so the hashed bytes are the stored line minus its "hash" member).
// PrevHash is the previous record's Hash: the hash chains the records, and the first record's
// PrevHash is 64 zeros. Seq starts at 1 and increases by one per record. Verify rejects a line
// that is not byte-for-byte the canonical encoding of the record it decodes to.
//
// # Recovery
//
// Records are acknowledged only after the whole batch holding them, newlines included, is
// fsynced. A crash can therefore leave at most an unterminated tail: bytes after the last
// newline (a torn line, or zeros a file system exposed after a crash). Open truncates that tail
// with a warning; Verify reports it without failing. Complete but unacknowledged lines of a
// batch cut short by a crash are valid records and stay: the decision they record was made,
// only its answer was lost, and a retry gets the same certificate back through idempotency.
// Every other defect (a changed, removed, inserted or reordered record) makes Open refuse and
// Verify report the first problem with file, line and seq.
//
// Removing records from the end of the ledger cannot be detected from the ledger alone; the
// Report's last seq and hash are what an operator anchors elsewhere (signed checkpoints are
// future work).
package ledger

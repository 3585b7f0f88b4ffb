-- The fleet's CA rotation lives in the journal, as the file ledger's does (issue 43): its
-- Rotated and Published records are the state, and each server follows them. The records carry
-- kind and signer in columns, so that a server reads the rotation records it has not seen
-- (a few per rotation) without reading the issuances; a Rotated record is appended only if no
-- other Rotated record of its signer came after the ones its server had seen (a compare-and-set
-- on the journal itself, under the head row). ca_sets, a copy of the sets beside them, goes.
ALTER TABLE ledger_records ADD COLUMN kind text CHECK (kind IN ('rotated', 'published'));
ALTER TABLE ledger_records ADD COLUMN signer text CHECK ((kind IS NULL) = (signer IS NULL));
-- The records a database at version 3 holds get their kind and signer from a backfill in Go
-- (schema.backfills), which reads every line as the ledger does: SQL's JSON types refuse
-- some lines a record may hold (a NUL in a free-text field).
CREATE INDEX ledger_records_rotation ON ledger_records (signer, seq) WHERE kind IS NOT NULL;
CREATE INDEX ledger_records_rotation_seq ON ledger_records (seq) WHERE kind IS NOT NULL;

-- ca_leaves is, per signer and CA fingerprint ('' for records that name none), the latest
-- NotAfter of a leaf the fleet issued: a previous CA leaves the trust bundle only once no leaf
-- any server signed with it can still be valid. The journal raises it in each batch.
CREATE TABLE ca_leaves (
    signer text NOT NULL,
    ca text NOT NULL,
    not_after timestamptz NOT NULL,
    PRIMARY KEY (signer, ca)
);
-- The leaves of the records already held: the backfill in Go.

DROP TABLE ca_sets;

-- The fleet's journal (the ledger) and its answers (one per object), issue 43.

-- ledger_head is the one coordination row: the last record's seq and hash. A writer takes it
-- FOR UPDATE, appends its batch after it and moves it, so that seqs are consecutive and the
-- hash chain never forks, whatever the number of writers.
CREATE TABLE ledger_head (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    seq bigint NOT NULL CHECK (seq >= 0),
    hash text NOT NULL
);
INSERT INTO ledger_head (seq, hash) VALUES (0, repeat('0', 64));

-- ledger_records holds every record's line, exactly as the file ledger stores it (the tree's
-- leaf), with the columns lookups use.
CREATE TABLE ledger_records (
    seq bigint PRIMARY KEY CHECK (seq >= 1),
    line bytea NOT NULL,
    hash text NOT NULL,
    at timestamptz NOT NULL,
    serial text,
    object_uid text
);
CREATE INDEX ledger_records_serial ON ledger_records (serial) WHERE serial IS NOT NULL;
CREATE INDEX ledger_records_object_uid ON ledger_records (object_uid) WHERE object_uid IS NOT NULL;
CREATE INDEX ledger_records_at ON ledger_records (at);

-- integrator_lease names the one server that builds the tree and signs checkpoints. fence
-- grows with every change of holder: a checkpoint carries the fence it was signed under, and
-- a deposed integrator, whose fence is no longer the lease's, cannot store one.
CREATE TABLE integrator_lease (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    holder text,
    fence bigint NOT NULL DEFAULT 0,
    expires timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO integrator_lease DEFAULT VALUES;

-- checkpoints are the signed checkpoints, by tree size.
CREATE TABLE checkpoints (
    size bigint PRIMARY KEY CHECK (size >= 0),
    signed bytea NOT NULL,
    fence bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);

-- answers: one per scope (a client's object UID, idempotency.Scope) across the fleet. The
-- first server to insert the row claims it (ON CONFLICT DO NOTHING) and holds it until
-- lease_until; a server that finds the lease expired takes the claim over by compare-and-set
-- on fence, which grows with every claim. The answer (the issued chain and its record) is
-- written by the journal in the transaction that stores the issuance's record, and only if the
-- record's server still holds the claim: an issuance is recorded and answered once, or not at
-- all.
CREATE TABLE answers (
    scope text PRIMARY KEY,
    request_hash bytea NOT NULL,
    holder text,
    fence bigint NOT NULL DEFAULT 1,
    lease_until timestamptz,
    chain bytea,
    serial text,
    not_before timestamptz,
    not_after timestamptz,
    issued_at timestamptz,
    replay_until timestamptz,
    record_seq bigint REFERENCES ledger_records (seq),
    CHECK ((chain IS NULL) = (record_seq IS NULL))
);
CREATE INDEX answers_issued_at ON answers (issued_at);

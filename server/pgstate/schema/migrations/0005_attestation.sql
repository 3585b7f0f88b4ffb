-- TPM attestation shared by the fleet (issue 43): a challenge one server made may be activated
-- on another, a ticket one server issued is spent once across the fleet, and an endorsement
-- key binds one node whichever server saw it first. The Bound and Unbound records in the
-- journal are the audit of the bindings; this table is their state.
CREATE TABLE attest_challenges (
    id text PRIMARY KEY,
    secret bytea NOT NULL,
    keys bytea,
    node text NOT NULL,
    expires timestamptz NOT NULL
);
CREATE INDEX attest_challenges_expires ON attest_challenges (expires);

CREATE TABLE attest_tickets (
    id text PRIMARY KEY,
    holder text NOT NULL,
    expires timestamptz NOT NULL
);
CREATE INDEX attest_tickets_expires ON attest_tickets (expires);

CREATE TABLE attest_bindings (
    node text PRIMARY KEY,
    ek text NOT NULL UNIQUE
);
-- The bindings the journal already holds (a database migrated with records in it): each
-- node's latest Bound or Unbound record, if it is a Bound one.
INSERT INTO attest_bindings (node, ek)
    SELECT node, ek FROM (
        SELECT DISTINCT ON (j ->> 'node') j ->> 'node' AS node, j ->> 'ek' AS ek, j ->> 'decision' AS decision
        FROM (SELECT seq, convert_from(line, 'UTF8')::jsonb AS j FROM ledger_records) AS r
        WHERE j ->> 'decision' IN ('bound', 'unbound')
        ORDER BY j ->> 'node', seq DESC
    ) AS latest
    WHERE decision = 'bound'
ON CONFLICT DO NOTHING;

-- TPM attestation shared by the fleet (issue 43): a challenge one server made may be activated
-- on another, a ticket one server issued is spent once across the fleet, and an endorsement
-- key binds one node whichever server saw it first. The Bound and Unbound records in the
-- journal are the audit of the bindings; this table is their state.
CREATE TABLE attest_challenges (
    id text PRIMARY KEY,
    secret bytea NOT NULL,
    keys bytea,
    node text NOT NULL,
    expires timestamptz NOT NULL,
    seal bytea -- the service's MAC over the challenge, with the fleet's ticket key
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
-- The bindings of the records already held (each node's latest Bound or Unbound record, if it
-- is a Bound one): the backfill in Go.

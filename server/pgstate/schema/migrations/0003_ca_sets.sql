-- Each signer's CA set (staged, active, retired CAs) shared by the fleet: the authority as a
-- Rotated record holds it, with a version that every change raises. A change is a
-- compare-and-set on the version, and is announced on the channel signet_ca_sets (the
-- signer's name as payload), so that every server reloads it at once.
CREATE TABLE ca_sets (
    signer text PRIMARY KEY,
    version bigint NOT NULL CHECK (version >= 1),
    authority jsonb NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);

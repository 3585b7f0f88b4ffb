-- The fleet's Merkle tree as C2SP tiles, written by the integrator: full tiles only (256
-- hashes, 8192 bytes), immutable once written. The right edge of each level is rebuilt from
-- the records after the last full tile.
CREATE TABLE tree_tiles (
    level integer NOT NULL CHECK (level >= 0),
    n bigint NOT NULL CHECK (n >= 0),
    data bytea NOT NULL CHECK (length(data) = 8192),
    PRIMARY KEY (level, n)
);

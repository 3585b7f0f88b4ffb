// Package pgstate is the server's state on PostgreSQL, for a fleet of signet-servers sharing
// one database (issue 43). It is not wired into signet-server yet (state.backend is to come);
// what it has, each part tested on a real PostgreSQL (internal/pgtest):
//
//   - Migrate: the schema as versioned embedded SQL (migrations/NNNN_name.sql, numbered from
//     1 without gaps), applied once however many servers start together (an advisory lock),
//     and refused when a newer binary migrated the database (ErrSchemaTooNew).
//   - Journal (decision.Journal): the ledger's records, each line exactly as the file ledger
//     stores it, appended in batches under the one ledger_head row (SELECT … FOR UPDATE), so
//     that servers appending at once keep one hash chain; group-committed within a server.
//   - Answers (decision.Answers): one answer per object across the fleet. A claim is a row
//     inserted with ON CONFLICT DO NOTHING, held for a lease and taken over by compare-and-set
//     on its fence once the lease ran out. The claim travels in the context to the Journal,
//     which stores an issuance's record and its answer in one transaction, and only while
//     the claim is still the server's (ErrClaimLost otherwise): an object is issued and
//     recorded once, or not at all.
//   - Integrator: the lease that makes one server the fleet's integrator (a fence that grows
//     with each holder), and checkpoints stored only under the live fence (ErrDeposed).
//     OpenTree and Integrate build the Merkle tree from the records, its tiles in the
//     database (Tiles, a ledgerproof.TileStorage), opening at any size by reading the tiles
//     and at most 255 records. IntegratorLoop runs it: compete for the lease, fold, sign,
//     store under the fence; a killed integrator's successor takes over once the lease runs
//     out (2 s in the test, then one round).
//   - CASets: each signer's CA set, swapped by compare-and-set on its version and announced
//     by LISTEN/NOTIFY, so that a change made on one server reaches the others at once.
package pgstate

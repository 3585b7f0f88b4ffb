// Package pgstate is the server's state on PostgreSQL, for a fleet of signet-servers sharing
// one database (state.backend: postgres; server/fleet.go wires it, docs/operations.md says how
// to run it). Each part is tested on a real PostgreSQL (internal/pgtest):
//
//   - Migrate: the schema (package schema: versioned embedded SQL with Go backfills), applied
//     once however many servers start together, and refused when a newer binary migrated the
//     database (ErrSchemaTooNew).
//   - Journal (decision.Journal): the ledger's records, each line exactly as the file ledger
//     stores it, appended in batches of two round trips under the one ledger_head row (SELECT
//     … FOR UPDATE), so that servers appending at once keep one hash chain. A batch also
//     stores its issuances' answers, raises each CA's last leaf (ca_leaves) and announces its
//     rotation records (NOTIFY signet_rotation). AppendRotation appends a Rotated record only
//     over the last one its server saw (ErrRotationRaced); RotationRecords and LastLeaves are
//     what a server follows the fleet's CA rotation by.
//   - Answers (decision.Answers): one answer per object across the fleet. Claims are rows
//     inserted with ON CONFLICT DO NOTHING, batched across concurrent calls, held for a lease
//     and taken over by compare-and-set on their fence once it ran out; storing the answer
//     moves the fence on. The claim travels in the context to the Journal, which stores an
//     issuance's record and its answer in one transaction, and only while the claim is still
//     the server's (ErrClaimLost otherwise): an object is issued and recorded once, or not at
//     all.
//   - Integrator and IntegratorLoop: the lease that makes one server the fleet's integrator
//     (a fence that grows with each holder), which checks each record as the next of the
//     chain, folds it into the Merkle tree (tiles in tree_tiles, Tiles), and stores signed
//     checkpoints only under the live fence (ErrDeposed). Proofs: each server's view of the
//     latest checkpoint, verified against the journal's tree before it is served.
//   - AttestState: TPM attestation's challenges, spent tickets and EK bindings.
//   - Prune: answers past the retention and old checkpoints; Listen: LISTEN/NOTIFY.
package pgstate

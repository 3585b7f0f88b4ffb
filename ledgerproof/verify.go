package ledgerproof

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// VerifyInclusion checks that leafLine (a ledger line, with or without its newline) is the
// leaf at index of the tree c commits to, using the RFC 6962 audit path proof
// (tlog.CheckRecord with LeafHash(leafLine)). c must come from OpenCheckpoint: this
// function trusts its size and root. Every failure, including an index not below c.Size, wraps
// ErrNotIncluded.
//
// The index binds the leaf's position, not its content: a verifier of a Signet record also
// checks that the record's own seq is index+1.
func VerifyInclusion(leafLine []byte, index int64, proof tlog.RecordProof, c Checkpoint) error {
	if index < 0 || index >= c.Size {
		return fmt.Errorf("verifying inclusion of leaf %d: %w: the checkpoint has %d leaves", index, ErrNotIncluded, c.Size)
	}
	if err := tlog.CheckRecord(proof, c.Size, c.Hash, index, LeafHash(leafLine)); err != nil {
		return fmt.Errorf("verifying inclusion of leaf %d in %s at size %d: %w: %w", index, c.Origin, c.Size, ErrNotIncluded, err)
	}
	return nil
}

// VerifyConsistency checks that the tree newer commits to extends the tree older commits
// to, using the RFC 6962 consistency proof (tlog.CheckTree). Both checkpoints must come from
// OpenCheckpoint. Rules, in order:
//
//   - the origins differ: ErrOriginMismatch;
//   - newer.Size < older.Size: ErrShrunk, whatever the proof (evidence of a rollback or a
//     fork: keep both signed checkpoints);
//   - equal sizes: the proof must be empty and the roots equal;
//   - older.Size 0: the proof must be empty and older's root the empty tree's (every tree
//     extends the empty one);
//   - otherwise tlog.CheckTree must accept the proof.
//
// The last three fail with ErrInconsistent. Two validly signed checkpoints that fail here
// are proof that the log misbehaved.
func VerifyConsistency(older, newer Checkpoint, proof tlog.TreeProof) error {
	op := fmt.Sprintf("verifying consistency of %s from size %d to %d", newer.Origin, older.Size, newer.Size)
	switch {
	case older.Origin != newer.Origin:
		return fmt.Errorf("%s: %w: older checkpoint is of %q", op, ErrOriginMismatch, older.Origin)
	case older.Size < 0 || newer.Size < 0:
		return fmt.Errorf("%s: %w: negative size", op, ErrInconsistent)
	case newer.Size < older.Size:
		return fmt.Errorf("%s: %w", op, ErrShrunk)
	case newer.Size == older.Size:
		if len(proof) != 0 {
			return fmt.Errorf("%s: %w: checkpoints of one size need an empty proof, got %d hashes", op, ErrInconsistent, len(proof))
		}
		if older.Hash != newer.Hash {
			return fmt.Errorf("%s: %w: two roots for one size (%s and %s): the log forked", op, ErrInconsistent, older.Hash, newer.Hash)
		}
		return nil
	case older.Size == 0:
		if len(proof) != 0 {
			return fmt.Errorf("%s: %w: a proof from the empty tree is empty, got %d hashes", op, ErrInconsistent, len(proof))
		}
		if older.Hash != emptyRoot {
			return fmt.Errorf("%s: %w: the empty tree's root is %s, not %s", op, ErrInconsistent, emptyRoot, older.Hash)
		}
		return nil
	}
	if err := tlog.CheckTree(proof, newer.Size, newer.Hash, older.Size, older.Hash); err != nil {
		return fmt.Errorf("%s: %w: %w", op, ErrInconsistent, err)
	}
	return nil
}

// ParseHashes reads proof hashes as the gRPC API carries them (each 32 raw bytes); a hash of
// another length is an error naming it.
func ParseHashes(bs [][]byte) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(bs))
	for i, b := range bs {
		if len(b) != len(out[i]) {
			return nil, fmt.Errorf("%w: proof hash %d has %d bytes, not %d", ErrMalformed, i, len(b), len(out[i]))
		}
		copy(out[i][:], b)
	}
	return out, nil
}

// HashBytes is the inverse of ParseHashes.
func HashBytes(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = append([]byte(nil), h[:]...)
	}
	return out
}

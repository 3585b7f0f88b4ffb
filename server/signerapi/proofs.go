package signerapi

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/signet-pki/signet/ledgerproof"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
)

// Proofs is what LedgerService needs to prove the ledger: its signed checkpoints (Latest and
// the recent ones by size), its tree and its records' lines.
type Proofs interface {
	Latest() (signed []byte, size int64)
	At(size int64) (signed []byte, ok bool)
	Tree() *ledgerproof.Tree
	Line(seq uint64) ([]byte, error)
}

// Refresher is Proofs that are brought up to date before each answer: a fleet's, whose
// checkpoints are signed by whichever server integrates. An error means the proofs cannot be
// served now (Unavailable: retry).
type Refresher interface {
	Refresh(ctx context.Context) (int64, error)
}

// refresh brings l's proofs up to date, if they are a Refresher.
func (l *LedgerService) refresh(ctx context.Context) error {
	r, ok := l.proofs.(Refresher)
	if !ok {
		return nil
	}
	if _, err := r.Refresh(ctx); err != nil {
		return status.Errorf(codes.Unavailable, "reading the fleet's latest checkpoint: %v", err)
	}
	return nil
}

// WithProofs makes l serve GetCheckpoint, ProveInclusion and ProveConsistency from p.
func (l *LedgerService) WithProofs(p Proofs) *LedgerService {
	l.proofs = p
	return l
}

// GetCheckpoint returns the latest signed checkpoint.
func (l *LedgerService) GetCheckpoint(ctx context.Context, _ *signetv1.GetCheckpointRequest) (*signetv1.GetCheckpointResponse, error) {
	if l.proofs == nil {
		return nil, status.Error(codes.Unimplemented, "this server signs no ledger checkpoints")
	}
	if err := l.refresh(ctx); err != nil {
		return nil, err
	}
	signed, size := l.proofs.Latest()
	return &signetv1.GetCheckpointResponse{SignedCheckpoint: signed, Size: size}, nil
}

// ProveInclusion returns a record the caller may see with its inclusion proof.
func (l *LedgerService) ProveInclusion(ctx context.Context, req *signetv1.ProveInclusionRequest) (*signetv1.ProveInclusionResponse, error) {
	if l.proofs == nil {
		return nil, status.Error(codes.Unimplemented, "this server signs no ledger checkpoints")
	}
	if err := l.refresh(ctx); err != nil {
		return nil, err
	}
	signed, size, err := l.checkpoint(req.GetTreeSize())
	if err != nil {
		return nil, err
	}
	seq := req.GetSeq()
	identity := ClientIdentity(ctx)
	switch {
	case seq != 0 && (req.GetSerialNumber() != "" || req.GetObjectUid() != ""):
		return nil, toStatus(fmt.Errorf("%w: give exactly one of serial_number, object_uid and seq", issuance.ErrMalformedRequest))
	case seq == 0: // FindRecords refuses neither or both of serial_number and object_uid
		recs, err := l.core.FindRecords(ctx, identity, req.GetObjectUid(), req.GetSerialNumber(), 1)
		if err != nil {
			return nil, toStatus(err)
		}
		if len(recs) == 0 {
			return nil, toStatus(fmt.Errorf("%w: no ledger record you may see matches", decision.ErrNotFound))
		}
		seq = recs[0].Seq
	}
	line, err := l.proofs.Line(seq)
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: no ledger record %d you may see", decision.ErrNotFound, seq))
	}
	var rec ledger.Record
	if err := json.Unmarshal(line, &rec); err != nil || !l.core.RecordVisible(identity, rec) {
		return nil, toStatus(fmt.Errorf("%w: no ledger record %d you may see", decision.ErrNotFound, seq))
	}
	if int64(seq) > size {
		return nil, toStatus(fmt.Errorf("%w: record %d is not covered by a signed checkpoint yet (latest covers %d); retry in a moment", decision.ErrCheckpointPending, seq, size))
	}
	proof, err := l.proofs.Tree().ProveInclusion(int64(seq)-1, size)
	if err != nil {
		return nil, toStatus(fmt.Errorf("proving record %d in the tree of size %d: %w", seq, size, err))
	}
	return &signetv1.ProveInclusionResponse{Seq: seq, Leaf: line, Proof: ledgerproof.HashBytes(proof), SignedCheckpoint: signed}, nil
}

// ProveConsistency returns the consistency proof between two sizes.
func (l *LedgerService) ProveConsistency(ctx context.Context, req *signetv1.ProveConsistencyRequest) (*signetv1.ProveConsistencyResponse, error) {
	if l.proofs == nil {
		return nil, status.Error(codes.Unimplemented, "this server signs no ledger checkpoints")
	}
	if err := l.refresh(ctx); err != nil {
		return nil, err
	}
	signed, size, err := l.checkpoint(req.GetNewSize())
	if err != nil {
		return nil, err
	}
	old := req.GetOldSize()
	switch {
	case old < 0:
		return nil, toStatus(fmt.Errorf("%w: old_size %d is negative", issuance.ErrMalformedRequest, old))
	case old > size && req.GetNewSize() != 0:
		return nil, toStatus(fmt.Errorf("%w: old_size %d is larger than new_size %d", issuance.ErrMalformedRequest, old, size))
	case old > size:
		return nil, toStatus(fmt.Errorf("%w: old_size %d is larger than the latest checkpoint's size %d: the ledger is shorter than the checkpoint you hold", decision.ErrLedgerBehind, old, size))
	}
	proof, err := l.proofs.Tree().ProveConsistency(old, size)
	if err != nil {
		return nil, toStatus(fmt.Errorf("proving consistency from %d to %d: %w", old, size, err))
	}
	return &signetv1.ProveConsistencyResponse{Proof: ledgerproof.HashBytes(proof), SignedCheckpoint: signed}, nil
}

// checkpoint returns the signed checkpoint of size (0: the latest).
func (l *LedgerService) checkpoint(size int64) ([]byte, int64, error) {
	if size == 0 {
		signed, size := l.proofs.Latest()
		return signed, size, nil
	}
	signed, ok := l.proofs.At(size)
	if !ok {
		_, latest := l.proofs.Latest()
		return nil, 0, toStatus(fmt.Errorf("%w: no signed checkpoint of size %d is kept (the latest covers %d); ask for size 0, the latest", decision.ErrNotFound, size, latest))
	}
	return signed, size, nil
}

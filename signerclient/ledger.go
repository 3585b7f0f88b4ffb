package signerclient

import (
	"context"
	"fmt"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// The LedgerService's proof calls, for the watcher's ledger witness: they go over the same
// connection, endpoints and fail-over as the signing calls, each bounded by the client's RPC
// timeout. Their answers are the server's claims: verify the signed checkpoints and proofs
// (ledgerproof) before trusting them.

// LedgerCheckpoint returns the server's latest signed checkpoint (GetCheckpoint).
func (c *Client) LedgerCheckpoint(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := signetv1.NewLedgerServiceClient(c.conn).GetCheckpoint(ctx, &signetv1.GetCheckpointRequest{})
	if err != nil {
		return nil, fmt.Errorf("getting the ledger's checkpoint: %w", err)
	}
	return resp.GetSignedCheckpoint(), nil
}

// LedgerConsistency returns the server's latest signed checkpoint and the proof that the
// ledger of oldSize records is a prefix of it (ProveConsistency). The server refuses
// (FailedPrecondition) when its ledger is shorter than oldSize.
func (c *Client) LedgerConsistency(ctx context.Context, oldSize int64) (signed []byte, proof [][]byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := signetv1.NewLedgerServiceClient(c.conn).ProveConsistency(ctx, &signetv1.ProveConsistencyRequest{OldSize: oldSize})
	if err != nil {
		return nil, nil, fmt.Errorf("proving the ledger consistent with its first %d records: %w", oldSize, err)
	}
	return resp.GetSignedCheckpoint(), resp.GetProof(), nil
}

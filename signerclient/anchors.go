package signerclient

import (
	"context"
	"errors"
	"fmt"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// errNoAnchors is returned when the server answers GetTrustAnchors without a certificate.
var errNoAnchors = errors.New("server returned no trust anchors")

// TrustAnchors asks the server for signerName's trust anchors (GetTrustAnchors) and returns
// them as the server sent them: PEM CA certificates, one or more. The call is bounded by the
// client's RPC timeout. Errors wrap the gRPC status; an empty answer is an error too.
func (c *Client) TrustAnchors(ctx context.Context, signerName string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rpc.GetTrustAnchors(ctx, &signetv1.GetTrustAnchorsRequest{SignerName: signerName})
	if err != nil {
		return nil, fmt.Errorf("getting trust anchors of %s: %w", signerName, err)
	}
	if resp.GetTrustAnchorsPem() == "" {
		return nil, fmt.Errorf("getting trust anchors of %s: %w", signerName, errNoAnchors)
	}
	return []byte(resp.GetTrustAnchorsPem()), nil
}

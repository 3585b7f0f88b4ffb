package signerclient

import (
	"context"
	"fmt"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// ReportTrustBundle tells the server that the trust bundle of signerName published in
// cluster (the name the server knows the cluster by) hashes to bundleHash (lower-case hex
// SHA-256 of the published trustBundle) and holds the certificates of fingerprints (lower-case
// hex SHA-256 of each DER): the proof of propagation that gates the activation of a staged
// CA. The server keeps the first time each bundle was reported, so reporting the same bundle
// again is cheap and harmless. The call is bounded by the client's RPC timeout. Errors wrap
// the gRPC status: Unimplemented from a server without the method, NotFound, PermissionDenied,
// InvalidArgument or FailedPrecondition (a cluster the server does not list for the signer)
// when it refuses.
func (c *Client) ReportTrustBundle(ctx context.Context, signerName, cluster, bundleHash string, fingerprints []string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, err := c.rpc.ReportTrustBundle(ctx, &signetv1.ReportTrustBundleRequest{
		SignerName:         signerName,
		Cluster:            cluster,
		BundleHash:         bundleHash,
		AnchorFingerprints: append([]string(nil), fingerprints...),
	})
	if err != nil {
		return fmt.Errorf("reporting the trust bundle of %s in cluster %s: %w", signerName, cluster, err)
	}
	return nil
}

// ReportTrustSource tells the server that the cluster's trust source for signerName (see
// signetv1.TrustSource; "apiserver-client-ca": the API server's client-ca-file) holds the
// certificates of fingerprints, the bundle hashing to bundleHash.
func (c *Client) ReportTrustSource(ctx context.Context, signerName, cluster, source, bundleHash string, fingerprints []string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, err := c.rpc.ReportTrustBundle(ctx, &signetv1.ReportTrustBundleRequest{
		SignerName: signerName, Cluster: cluster, BundleHash: bundleHash, Source: source,
		AnchorFingerprints: append([]string(nil), fingerprints...),
	})
	if err != nil {
		return fmt.Errorf("reporting the %s of %s in cluster %s: %w", source, signerName, cluster, err)
	}
	return nil
}

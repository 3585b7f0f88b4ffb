package signerclient

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/signet-pki/signet/objectrequest"
)

// Attested is what a server verified of a CertificateSigningRequest's TPM evidence.
type Attested struct {
	// Node is the node name proved; EK the endorsement key's fingerprint and EKTrust why it is
	// trusted; AKName the attestation key's TPM name; ProviderID the request's provider ID.
	Node, EK, EKTrust, AKName, ProviderID string
	// FirstUse is true when signing will bind the EK to the node for the first time.
	FirstUse bool
}

// VerifyAttestation asks the server to verify the TPM evidence of csr, for a signer whose
// profile requires attestation, and the signer's rules on it (with the node's addresses, when
// given), without signing it. Its errors are classified with Classify:
// a terminal one (ATTESTATION_FAILED, MALFORMED_REQUEST, POLICY_VIOLATION) is a reason to
// deny the request.
func (c *Client) VerifyAttestation(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, nodeAddresses ...corev1.NodeAddress) (Attested, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rpc.VerifyAttestation(ctx, objectrequest.VerifyAttestation(csr, nodeAddresses))
	if err != nil {
		return Attested{}, fmt.Errorf("verifying the attestation of CSR %s: %w", csr.Name, err)
	}
	return Attested{Node: resp.GetNode(), EK: resp.GetEk(), EKTrust: resp.GetEkTrust(), AKName: resp.GetAkName(),
		ProviderID: resp.GetProviderId(), FirstUse: resp.GetFirstUse()}, nil
}

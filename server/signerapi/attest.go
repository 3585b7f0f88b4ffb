package signerapi

import (
	"context"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// VerifyAttestation verifies the TPM evidence of a CertificateSigningRequest for an attested
// signer without signing (decision.Core.VerifyAttestation), for an approver. A request
// without its requester or object is refused (MALFORMED_REQUEST naming the field) and
// recorded.
func (s *Service) VerifyAttestation(ctx context.Context, req *signetv1.VerifyAttestationRequest) (*signetv1.VerifyAttestationResponse, error) {
	as := &signetv1.SignCertificateSigningRequestRequest{
		SignerName: req.GetSignerName(), Request: req.GetRequest(), Usages: req.GetUsages(),
		Requester: req.GetRequester(), Object: req.GetObject(), NodeAddresses: req.GetNodeAddresses(),
	}
	if req != nil && req.ExpirationSeconds != nil {
		v := req.GetExpirationSeconds()
		as.ExpirationSeconds = &v
	}
	identity, csr := ClientIdentity(ctx), CSRFromProto(as)
	if err := requireCSRParts(as, true, s.core.Caller(identity).Principal()); err != nil {
		return nil, toStatus(s.core.RefuseCSR(ctx, identity, csr, err, ""))
	}
	id, firstUse, err := s.core.VerifyAttestation(ctx, identity, csr)
	if err != nil {
		return nil, toStatus(err)
	}
	return &signetv1.VerifyAttestationResponse{Node: id.Node, Ek: id.EK, EkTrust: id.EKTrust, AkName: id.AKName,
		ProviderId: id.ProviderID, FirstUse: firstUse}, nil
}

// ForgetAttestationBinding clears a node's endorsement key binding for an admin of an
// attested signer (decision.Core.ForgetAttestation).
func (a *AuthorityService) ForgetAttestationBinding(ctx context.Context, req *signetv1.ForgetAttestationBindingRequest) (*signetv1.ForgetAttestationBindingResponse, error) {
	ek, seq, err := a.core.ForgetAttestation(ctx, ClientIdentity(ctx), req.GetSignerName(), req.GetNode(), req.GetReason())
	if err != nil {
		return nil, toStatus(err)
	}
	return &signetv1.ForgetAttestationBindingResponse{Ek: ek, LedgerSeq: seq}, nil
}

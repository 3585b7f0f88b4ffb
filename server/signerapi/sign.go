package signerapi

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/issuance"
)

// SignCertificateSigningRequest decides on one CertificateSigningRequest
// (decision.Core.SignCSR).
//
// A request without its requester or object is refused (MALFORMED_REQUEST naming the field)
// and recorded as the core records its own refusals (decision.Core.RefuseCSR).
func (s *Service) SignCertificateSigningRequest(ctx context.Context, req *signetv1.SignCertificateSigningRequestRequest) (*signetv1.SignCertificateSigningRequestResponse, error) {
	identity, csr := ClientIdentity(ctx), CSRFromProto(req)
	if err := requireCSRParts(req, true, s.core.Caller(identity).Principal()); err != nil {
		return nil, toStatus(s.core.RefuseCSR(ctx, identity, csr, err, ""))
	}
	issued, err := s.core.SignCSR(ctx, identity, csr)
	if err != nil {
		return nil, toStatus(err)
	}
	return &signetv1.SignCertificateSigningRequestResponse{
		CertificateChainPem: string(issued.Chain),
		SerialNumber:        issued.Serial,
		NotBefore:           timestamppb.New(issued.NotBefore),
		NotAfter:            timestamppb.New(issued.NotAfter),
	}, nil
}

// CSRFromProto converts the wire request to the core's. The webhook converts the objects it is
// posted through it too (after objectrequest.CSR), so both front doors ask the same.
// Absent parts (a nil req, requester or object) convert to their zero values.
func CSRFromProto(req *signetv1.SignCertificateSigningRequestRequest) decision.CSR {
	r := issuance.Request{
		SignerName: req.GetSignerName(),
		PEM:        req.GetRequest(),
		Usages:     req.GetUsages(),
		Requester: issuance.Requester{
			Username: req.GetRequester().GetUsername(),
			UID:      req.GetRequester().GetUid(),
			Groups:   req.GetRequester().GetGroups(),
		},
	}
	if req != nil && req.ExpirationSeconds != nil {
		v := req.GetExpirationSeconds()
		r.ExpirationSeconds = &v
	}
	for _, a := range req.GetNodeAddresses() {
		r.NodeAddresses = append(r.NodeAddresses, issuance.NodeAddress{Type: a.GetType(), Address: a.GetAddress()})
	}
	if extra := req.GetRequester().GetExtra(); len(extra) > 0 {
		r.Requester.Extra = make(map[string][]string, len(extra))
		for k, v := range extra {
			r.Requester.Extra[k] = v.GetValues()
		}
	}
	return decision.CSR{Object: objectFromProto(req.GetObject()), Request: r}
}

// objectFromProto converts the wire object to the core's.
func objectFromProto(o *signetv1.KubernetesObject) decision.Object {
	return decision.Object{UID: o.GetUid(), Name: o.GetName()}
}

package signerapi

import (
	"context"
	"maps"

	"google.golang.org/protobuf/types/known/timestamppb"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/issuance"
)

// SignPodCertificateRequest decides on one PodCertificateRequest (decision.Core.SignPod).
// The response carries the chain (leaf, then intermediates), the serial in lower-case hex,
// NotBefore, NotAfter and beginRefreshAt (issuance.BeginRefreshAt, the same on a replay).
//
// A request without its object or pod is refused (MALFORMED_REQUEST naming the field) and
// recorded as the core records its own refusals (decision.Core.RefusePod).
func (s *Service) SignPodCertificateRequest(ctx context.Context, req *signetv1.SignPodCertificateRequestRequest) (*signetv1.SignPodCertificateRequestResponse, error) {
	identity, pod := ClientIdentity(ctx), podFromProto(req)
	if err := requirePodParts(req); err != nil {
		return nil, toStatus(s.core.RefusePod(ctx, identity, pod, err, ""))
	}
	issued, err := s.core.SignPod(ctx, identity, pod)
	if err != nil {
		return nil, toStatus(err)
	}
	return &signetv1.SignPodCertificateRequestResponse{
		CertificateChainPem: string(issued.Chain),
		SerialNumber:        issued.Serial,
		NotBefore:           timestamppb.New(issued.NotBefore),
		NotAfter:            timestamppb.New(issued.NotAfter),
		BeginRefreshAt:      timestamppb.New(issuance.BeginRefreshAt(issued.NotBefore, issued.NotAfter)),
	}, nil
}

// podFromProto converts the wire request to the core's.
func podFromProto(req *signetv1.SignPodCertificateRequestRequest) decision.Pod {
	pod := req.GetPod()
	return decision.Pod{
		Object: objectFromProto(req.GetObject()),
		Request: issuance.PodRequest{
			SignerName: req.GetSignerName(),
			Pod: issuance.PodIdentity{
				Namespace:          pod.GetNamespace(),
				PodName:            pod.GetPodName(),
				PodUID:             pod.GetPodUid(),
				ServiceAccountName: pod.GetServiceAccountName(),
				ServiceAccountUID:  pod.GetServiceAccountUid(),
				NodeName:           pod.GetNodeName(),
				NodeUID:            pod.GetNodeUid(),
			},
			StubPKCS10Request:         req.GetStubPkcs10Request(),
			PKIXPublicKey:             req.GetPkixPublicKey(),
			ProofOfPossession:         req.GetProofOfPossession(),
			MaxExpirationSeconds:      req.GetMaxExpirationSeconds(),
			UnverifiedUserAnnotations: maps.Clone(req.GetUnverifiedUserAnnotations()),
		},
	}
}

package signerapi

import (
	"context"
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
)

// Log keys of the pod identity.
const (
	logKeyNamespace      = "namespace"
	logKeyPod            = "pod"
	logKeyServiceAccount = "service_account"
	logKeyNode           = "node"
)

// SignPodCertificateRequest decides on one PodCertificateRequest as
// SignCertificateSigningRequest decides on a CertificateSigningRequest: the same rate limits,
// authorization, required object UID, idempotency, ledger record before the answer (with the
// object kind PodCertificateRequest and, for an issuance, the pod in its message), metrics
// and logs. The signer must use the pod-identity profile (any other refuses with
// POLICY_VIOLATION); see issuance.Issuer.IssuePod for the pipeline. Refusals of the
// unverified user annotations carry the reason UNKNOWN_ANNOTATION.
//
// Idempotency has a time limit here. The kube-apiserver accepts an Issued status only while
// its notBefore is within 5 minutes of the apiserver's clock, and NotBefore is
// issuance.PodBackdate before signing. A stored answer is therefore replayed only while
// now − NotBefore < issuance.PodReplayWindow (4 minutes), which leaves a minute for the
// status write and clock skew. After that the same request (same UID and request hash) is
// issued anew: a new certificate, a new "issued" ledger record for the same object, and the
// stored answer replaced. A different request for the UID stays an IDEMPOTENCY_CONFLICT for
// the whole retention. The window survives a restart (the store is rebuilt with ReplayUntil).
//
// The response carries the chain (leaf, then intermediates), the serial in lower-case hex,
// NotBefore, NotAfter and beginRefreshAt (issuance.BeginRefreshAt, the same on a replay).
func (s *Service) SignPodCertificateRequest(ctx context.Context, req *signetv1.SignPodCertificateRequestRequest) (*signetv1.SignPodCertificateRequestResponse, error) {
	start := s.opts.Clock.Now()
	pod := req.GetPod()
	d := s.newDecision(ctx, issuance.KindPodCertificateRequest, req.GetSignerName(), req.GetObject(), "",
		logKeyNamespace, pod.GetNamespace(),
		logKeyPod, pod.GetPodName(),
		logKeyServiceAccount, pod.GetServiceAccountName(),
		logKeyNode, pod.GetNodeName(),
	)
	sg, err := s.admit(ctx, d, func() error { return checkPodRequest(req) })
	if err != nil {
		return nil, err
	}
	podReq := podRequestFromProto(req)
	d.hash = idempotency.PodRequestHash(podReq)
	entry, res, err := s.opts.Store.Do(ctx, idempotency.Scope(d.identity, d.objectUID), d.hash, func() (idempotency.Entry, error) {
		t := s.opts.Clock.Now()
		cert, err := sg.Issuer.IssuePod(podReq)
		if err != nil {
			return idempotency.Entry{}, err
		}
		s.opts.Metrics.ObserveIssuance(d.signer, s.since(t))
		return s.recordIssued(ctx, d, &cert.Certificate, describePod(podReq.Pod))
	})
	if err := s.settle(ctx, d, start, entry, res, err); err != nil {
		return nil, err
	}
	return &signetv1.SignPodCertificateRequestResponse{
		CertificateChainPem: string(entry.Chain),
		SerialNumber:        entry.Serial,
		NotBefore:           timestamppb.New(entry.NotBefore),
		NotAfter:            timestamppb.New(entry.NotAfter),
		BeginRefreshAt:      timestamppb.New(issuance.BeginRefreshAt(entry.NotBefore, entry.NotAfter)),
	}, nil
}

// ReplayUntil is the end of the replay window of the answer recorded in r (see
// SignPodCertificateRequest): NotBefore + issuance.PodReplayWindow for a
// PodCertificateRequest, none (the zero time: replayed until retention ends) for anything
// else. It serves as idempotency.Options.ReplayUntil, so the window survives a restart.
func ReplayUntil(r ledger.Record) time.Time {
	if r.ObjectKind != string(issuance.KindPodCertificateRequest) || r.NotBefore.IsZero() {
		return time.Time{}
	}
	return r.NotBefore.Add(issuance.PodReplayWindow)
}

// describePod names the pod of an issuance for its ledger record.
func describePod(p issuance.PodIdentity) string {
	return fmt.Sprintf("pod %s/%s (uid %s), service account %s (uid %s), node %s (uid %s)",
		p.Namespace, p.PodName, p.PodUID, p.ServiceAccountName, p.ServiceAccountUID, p.NodeName, p.NodeUID)
}

// podRequestFromProto converts the wire request to the pipeline's request.
func podRequestFromProto(req *signetv1.SignPodCertificateRequestRequest) issuance.PodRequest {
	pod := req.GetPod()
	return issuance.PodRequest{
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
	}
}

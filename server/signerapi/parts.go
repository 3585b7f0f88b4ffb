package signerapi

import (
	"context"
	"fmt"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/issuance"
)

// The parts of a request its handler needs: a message field that is absent is refused as
// MALFORMED_REQUEST naming it, before anything reads it. Every client Signet ships sends them
// (built by objectrequest: CSR, VerifyAttestation and PodRequest; signetctl explain).

// missing is the refusal of an absent field, saying what it should hold.
func missing(field, what string) error {
	return decisionErr(issuance.ErrMalformedRequest, field+" is required: "+what)
}

// requireCSRParts refuses a CertificateSigningRequest request without its requester (unless
// the caller is a principal, whose requester is itself), or (when needObject: a signing call)
// without its object.
func requireCSRParts(req *signetv1.SignCertificateSigningRequestRequest, needObject, principal bool) error {
	switch {
	case req.GetRequester() == nil && !principal:
		return missing("requester", "the user who created the CertificateSigningRequest (spec.username, spec.uid, spec.groups, spec.extra)")
	case needObject && req.GetObject() == nil:
		return missing("object", "the CertificateSigningRequest's metadata.uid (the idempotency key) and metadata.name")
	}
	return nil
}

// requirePodParts refuses a PodCertificateRequest request without its object or its pod.
func requirePodParts(req *signetv1.SignPodCertificateRequestRequest) error {
	switch {
	case req.GetObject() == nil:
		return missing("object", "the PodCertificateRequest's metadata.uid (the idempotency key) and metadata.name")
	case req.GetPod() == nil:
		return missing("pod", "the pod, service account and node of the PodCertificateRequest's spec")
	}
	return nil
}

// Undecodable answers a call whose message did not decode as its method's request (invalid
// UTF-8 in a string field, a truncated or corrupt body; err is protobuf's error): refused as
// MALFORMED_REQUEST, final for a client, instead of grpc-go's Internal. A signing call is
// recorded as the core records its own refusals, without an object (what decoded of the
// message is not trusted); other calls record nothing, as they never do.
func Undecodable(core *decision.Core) func(ctx context.Context, method string, err error) error {
	return func(ctx context.Context, method string, err error) error {
		refusal := fmt.Errorf("%w: the message is not a valid request of %s: %v", issuance.ErrMalformedRequest, method, err)
		identity := ClientIdentity(ctx)
		switch method {
		case signetv1.SignerService_SignCertificateSigningRequest_FullMethodName:
			refusal = core.RefuseCSR(ctx, identity, decision.CSR{}, refusal, "")
		case signetv1.SignerService_SignPodCertificateRequest_FullMethodName:
			refusal = core.RefusePod(ctx, identity, decision.Pod{}, refusal, "")
		}
		return toStatus(refusal)
	}
}

// InternalStatus is the answer to a call whose handler panicked: Internal, with the INTERNAL
// reason and the generic message; the guard has logged the detail.
func InternalStatus() error { return toStatus(decision.ErrPanicked) }

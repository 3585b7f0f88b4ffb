package decision

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/signet-pki/signet/server/access"
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

// SignPod decides on one PodCertificateRequest for the client identity as SignCSR decides on
// a CertificateSigningRequest: the same rate limits,
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
// The answer's beginRefreshAt is issuance.BeginRefreshAt(NotBefore, NotAfter), the same on a
// replay.
func (c *Core) SignPod(ctx context.Context, identity string, req Pod) (Issued, error) {
	r := req.Request
	d := c.podDecision(identity, req)
	return c.decide(ctx, d, func() error { return cmp.Or(principalPod(c.Caller(identity)), checkPod(req)) },
		func() []byte { return idempotency.PodRequestHash(r) },
		func(sg *Signer, _ decisionContext) (*issuance.Certificate, string, error) {
			cert, err := sg.Issuer.IssuePod(r)
			if err != nil {
				return nil, "", err
			}
			return &cert.Certificate, describePod(r.Pod), nil
		})
}

// principalPod refuses a principal's PodCertificateRequest: a principal asks for itself, and a
// pod certificate is asked for by the pod's kubelet, forwarded.
func principalPod(call access.Caller) error {
	if call.Principal() {
		return fmt.Errorf("%w: client %q is a principal, which asks for itself; pod certificates are forwarded for their pods", issuance.ErrPolicyViolation, call.Identity)
	}
	return nil
}

// podDecision is the context of a call about the PodCertificateRequest req.
func (c *Core) podDecision(identity string, req Pod) decisionContext {
	r := req.Request
	return c.newDecision(identity, issuance.KindPodCertificateRequest, r.SignerName, req.Object, "",
		logKeyNamespace, r.Pod.Namespace,
		logKeyPod, r.Pod.PodName,
		logKeyServiceAccount, r.Pod.ServiceAccountName,
		logKeyNode, r.Pod.NodeName,
	)
}

// Pod is one PodCertificateRequest to decide on: its object and the request as the apiserver
// holds it.
type Pod struct {
	Object  Object
	Request issuance.PodRequest
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

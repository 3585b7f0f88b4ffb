package issuance

import (
	"fmt"
	"time"
)

// Validity rules of pod certificates. The kube-apiserver checks them when the signer writes an
// Issued status to a PodCertificateRequest, so a certificate outside them could never be
// delivered.
const (
	// PodBackdate is how far NotBefore is set before the signing time (then truncated to whole
	// seconds, as the status stores it). The kube-apiserver refuses a notBefore more than 5
	// minutes from its own clock, so the backdate, the time until the status is written and
	// the clock skew between the hosts must stay under 5 minutes together:
	// kube-controller-manager's 5-minute CSR backdate would never pass.
	PodBackdate = time.Minute
	// PodReplayWindow is how long after its NotBefore an issued pod certificate may still be
	// handed out again for the same request (idempotency): the kube-apiserver takes it until
	// NotBefore + 5 minutes by its own clock, and the last minute is left for writing the
	// status and for clock skew. Later, the same request gets a new certificate.
	PodReplayWindow = 4 * time.Minute
	// PodMinLifetime is the shortest pod certificate the kube-apiserver accepts.
	PodMinLifetime = time.Hour
	// PodRefreshMargin is how far beginRefreshAt must lie after NotBefore and before NotAfter.
	PodRefreshMargin = 10 * time.Minute
	// PodMinRefreshLead is the least time between beginRefreshAt and NotAfter: the kubelet
	// adds up to 5 minutes of jitter before it asks again, and its new request must still be
	// issued before the certificate expires.
	PodMinRefreshLead = 30 * time.Minute
)

// PodCertificate is a certificate issued for a PodCertificateRequest.
type PodCertificate struct {
	Certificate
	// BeginRefreshAt is when the kubelet should start asking for the next certificate:
	// BeginRefreshAt(Leaf.NotBefore, Leaf.NotAfter).
	BeginRefreshAt time.Time
}

// IssuePod runs the pipeline for one PodCertificateRequest; only the first three steps differ
// from Issue:
//   - kind: the signer's policy must serve PodCertificateRequests (ErrPolicyViolation);
//   - parse: ParsePodKey (one way of naming the key, proof of possession, key type and size);
//   - policy: the signer's profile (see Policy.EvaluatePod);
//   - template: no subject, the decision's URI SANs only, the decision's key usages, CA:FALSE,
//     a random 128-bit serial; NotBefore = signing time − PodBackdate, in whole seconds;
//     NotAfter = NotBefore + lifetime, never past the CA's NotAfter; a certificate shorter
//     than PodMinLifetime (a CA about to expire) is refused with ErrPolicyViolation;
//   - lint, sign and verify as for Issue.
func (i *Issuer) IssuePod(req PodRequest) (*PodCertificate, error) {
	p, err := i.preparePod(req)
	if err != nil {
		return nil, err
	}
	cert, err := i.sign(p)
	if err != nil {
		return nil, err
	}
	return &PodCertificate{Certificate: *cert, BeginRefreshAt: BeginRefreshAt(cert.Leaf.NotBefore, cert.Leaf.NotAfter)}, nil
}

// ExplainPod runs kind, parse, policy, template and lint for a PodCertificateRequest without
// signing, and reports every rule.
func (i *Issuer) ExplainPod(req PodRequest) Explanation {
	p, err := i.preparePod(req)
	return i.explain(p, err, "request: a stub PKCS#10 request or a public key with proof of possession, with a supported key")
}

// preparePod runs kind, parse, policy, template and lint for a PodCertificateRequest.
func (i *Issuer) preparePod(req PodRequest) (*prepared, error) {
	if p, err := i.admit(req.SignerName, KindPodCertificateRequest); err != nil {
		return p, err
	}
	key, err := ParsePodKey(req)
	if err != nil {
		return nil, err
	}
	p := &prepared{pub: key.PublicKey}
	p.decision, p.rules, err = i.policy.EvaluatePod(key, req)
	if err != nil {
		return p, err
	}
	notBefore, notAfter, err := i.podValidity(p.decision.Lifetime)
	if err != nil {
		return p, err
	}
	return p, i.finish(p, leafNames{uris: p.decision.URIs}, notBefore, notAfter)
}

// podValidity returns the validity of a pod certificate with lifetime (see IssuePod). An
// expired CA is an (internal) error; a validity shorter than PodMinLifetime is a refusal.
func (i *Issuer) podValidity(lifetime time.Duration) (notBefore, notAfter time.Time, err error) {
	now, caNotAfter, err := i.signingTime()
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	notBefore = now.Add(-PodBackdate).Truncate(time.Second)
	notAfter = notBefore.Add(lifetime)
	clamped := notAfter.After(caNotAfter)
	if clamped {
		notAfter = caNotAfter.Truncate(time.Second)
	}
	if got := notAfter.Sub(notBefore); got < PodMinLifetime {
		why := fmt.Sprintf("the lifetime would be %s", got)
		if clamped {
			why = fmt.Sprintf("the CA certificate expires at %s, which leaves %s", caNotAfter.UTC().Format(time.RFC3339), got)
		}
		return time.Time{}, time.Time{}, fmt.Errorf("%w: %s; the kube-apiserver refuses pod certificates shorter than %s", ErrPolicyViolation, why, PodMinLifetime)
	}
	return notBefore, notAfter, nil
}

// BeginRefreshAt returns when the kubelet should start refreshing a pod certificate valid from
// notBefore to notAfter: a third of the lifetime before NotAfter, but at least
// PodMinRefreshLead before it, in whole seconds, and always within the kube-apiserver's window
// [notBefore + PodRefreshMargin, notAfter − PodRefreshMargin] (which every lifetime of at
// least PodMinLifetime meets without clamping). It is a function of the validity alone, so a
// replayed answer carries the same time as the first.
func BeginRefreshAt(notBefore, notAfter time.Time) time.Time {
	lead := max(notAfter.Sub(notBefore)/3, PodMinRefreshLead)
	at := notAfter.Add(-lead).Truncate(time.Second)
	if earliest := notBefore.Add(PodRefreshMargin); at.Before(earliest) {
		at = earliest
	}
	if latest := notAfter.Add(-PodRefreshMargin); at.After(latest) {
		at = latest
	}
	return at
}

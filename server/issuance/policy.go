package issuance

import (
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"net/url"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// Lifetime rules shared with kube-controller-manager's built-in signer.
const (
	// Backdate is how far NotBefore is set before the signing time, to absorb clock skew.
	Backdate = 5 * time.Minute
	// ShortLifetime is the lifetime under which NotAfter is not shortened by Backdate.
	ShortLifetime = 8 * time.Hour
	// MinLifetime is the floor applied to a requested lifetime.
	MinLifetime = 10 * time.Minute
)

// Extension OIDs a Signet leaf may carry.
var (
	oidBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}
	oidKeyUsage         = asn1.ObjectIdentifier{2, 5, 29, 15}
	oidExtKeyUsage      = asn1.ObjectIdentifier{2, 5, 29, 37}
	oidSubjectAltName   = asn1.ObjectIdentifier{2, 5, 29, 17}
	oidAuthorityKeyID   = asn1.ObjectIdentifier{2, 5, 29, 35}
)

var keyUsages = map[certificatesv1.KeyUsage]x509.KeyUsage{
	certificatesv1.UsageSigning:           x509.KeyUsageDigitalSignature,
	certificatesv1.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
	certificatesv1.UsageContentCommitment: x509.KeyUsageContentCommitment,
	certificatesv1.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
	certificatesv1.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
	certificatesv1.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
	certificatesv1.UsageCertSign:          x509.KeyUsageCertSign,
	certificatesv1.UsageCRLSign:           x509.KeyUsageCRLSign,
	certificatesv1.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
	certificatesv1.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
}

var extKeyUsages = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	certificatesv1.UsageAny:             x509.ExtKeyUsageAny,
	certificatesv1.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
	certificatesv1.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
	certificatesv1.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
	certificatesv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
	certificatesv1.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
	certificatesv1.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
	certificatesv1.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
	certificatesv1.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
	certificatesv1.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	certificatesv1.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// RuleResult is the outcome of one rule of a policy, for explaining a decision.
type RuleResult struct {
	// Rule names the rule, e.g. "usages: at most digital signature, key encipherment, client auth".
	Rule string
	// Passed is true when the request satisfies the rule.
	Passed bool
	// Detail says what was found.
	Detail string
}

// Decision is what a policy allows for one request.
type Decision struct {
	// Lifetime is the certificate lifetime, before backdating (see Issuer.Issue).
	Lifetime time.Duration
	// KeyUsage and ExtKeyUsage are the only usage extensions the certificate carries.
	KeyUsage    x509.KeyUsage
	ExtKeyUsage []x509.ExtKeyUsage
	// URIs are the URI SANs of a pod certificate, which the policy derives from the pod
	// identity (a pod certificate has no other name). Unused for CertificateSigningRequests,
	// whose subject and SANs are the request's.
	URIs []*url.URL
	// Grounds names the rule that let this requester have this certificate when it is not the
	// ordinary one, e.g. `bootstrap: requester in group "system:bootstrappers"` for a node's
	// first certificate requested with a bootstrap token. The ledger records it with the
	// issuance. Empty for the ordinary case.
	Grounds string
}

// Kind is the kind of Kubernetes object a request comes from.
type Kind string

// The kinds of request the pipeline issues for.
const (
	KindCertificateSigningRequest Kind = "CertificateSigningRequest"
	KindPodCertificateRequest     Kind = "PodCertificateRequest"
)

// Policy decides whether a parsed request may be signed, and with which lifetime and usages.
// The signer profiles in server/profile implement it.
type Policy interface {
	// Name names the policy in messages, e.g. "kubelet-serving".
	Name() string
	// Kind is the one kind of object whose requests the policy serves. The issuer refuses a
	// request of the other kind before parsing it.
	Kind() Kind
	// Evaluate checks a parsed request (its signature and key already verified by ParseCSR)
	// against every rule. It returns the rules evaluated, in order, with their outcomes, and
	// the decision. err is non-nil exactly when a rule failed; it wraps ErrPolicyViolation,
	// ErrUnsupportedKey or ErrMalformedRequest and names the first failed rule.
	Evaluate(csr *x509.CertificateRequest, req Request) (Decision, []RuleResult, error)
	// EvaluatePod is Evaluate for a PodCertificateRequest whose key ParsePodKey has parsed
	// and verified. The decision's URIs are the certificate's only names. err may also wrap
	// ErrUnknownAnnotation.
	EvaluatePod(key *PodKey, req PodRequest) (Decision, []RuleResult, error)
}

// ParseUsages maps certificates.k8s.io/v1 usage strings to key usage bits and sorted,
// de-duplicated extended key usages, as kube-controller-manager does. An unknown usage is an
// error wrapping ErrPolicyViolation.
func ParseUsages(usages []string) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	ekus := map[x509.ExtKeyUsage]bool{}
	for _, s := range usages {
		u := certificatesv1.KeyUsage(s)
		if bit, ok := keyUsages[u]; ok {
			ku |= bit
		} else if eku, ok := extKeyUsages[u]; ok {
			ekus[eku] = true
		} else {
			return 0, nil, fmt.Errorf("%w: unknown usage %q", ErrPolicyViolation, s)
		}
	}
	var out []x509.ExtKeyUsage
	for eku := range ekus {
		out = append(out, eku)
	}
	slices.Sort(out)
	return ku, out, nil
}

// CheckNotCA refuses a request whose extensions ask for a CA certificate. The issued
// certificate never carries requested extensions, so this is about telling the requester
// plainly that the request cannot be met, not about what ends up in the certificate.
func CheckNotCA(csr *x509.CertificateRequest) error {
	for _, ext := range csr.Extensions {
		if !ext.Id.Equal(oidBasicConstraints) {
			continue
		}
		var bc struct {
			IsCA       bool `asn1:"optional"`
			MaxPathLen int  `asn1:"optional,default:-1"`
		}
		if rest, err := asn1.Unmarshal(ext.Value, &bc); err != nil || len(rest) != 0 {
			return fmt.Errorf("%w: basic constraints extension does not parse", ErrMalformedRequest)
		}
		if bc.IsCA {
			return fmt.Errorf("%w: the request asks for a CA certificate (basic constraints CA:TRUE); this signer issues only leaf certificates", ErrPolicyViolation)
		}
	}
	return nil
}

// ClampLifetime clamps a requested lifetime the way kube-controller-manager does: absent →
// max; otherwise min(requested, max), never below MinLifetime.
func ClampLifetime(expirationSeconds *int32, max time.Duration) time.Duration {
	if expirationSeconds == nil {
		return max
	}
	requested := time.Duration(*expirationSeconds) * time.Second
	switch {
	case requested > max:
		return max
	case requested < MinLifetime:
		return MinLifetime
	default:
		return requested
	}
}

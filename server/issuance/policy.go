package issuance

import (
	"crypto/x509"
	"encoding/asn1"
	"fmt"
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

var oidBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}

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

// leafForbiddenUsages are usages that only a CA certificate needs.
var leafForbiddenUsages = []certificatesv1.KeyUsage{certificatesv1.UsageCertSign, certificatesv1.UsageCRLSign}

// Policy decides whether a parsed request may be signed, and with which lifetime and usages.
// The zero value is not usable: MaxLifetime must be positive.
type Policy struct {
	// MaxLifetime caps the certificate lifetime; a request without expirationSeconds gets it.
	MaxLifetime time.Duration
}

// decision is what a policy allows for one request.
type decision struct {
	lifetime    time.Duration
	keyUsage    x509.KeyUsage
	extKeyUsage []x509.ExtKeyUsage
}

// evaluate applies the policy to a parsed request:
//   - at least one usage, each a known certificates.k8s.io/v1 usage, none of "cert sign" and
//     "crl sign";
//   - no basic constraints extension asking for CA:TRUE;
//   - lifetime = expirationSeconds clamped to [MinLifetime, MaxLifetime]; MaxLifetime if absent.
//
// Errors wrap ErrPolicyViolation.
func (p Policy) evaluate(csr *x509.CertificateRequest, req Request) (decision, error) {
	var d decision
	if len(req.Usages) == 0 {
		return d, fmt.Errorf("%w: no usages requested", ErrPolicyViolation)
	}
	ekus := map[x509.ExtKeyUsage]bool{}
	for _, s := range req.Usages {
		u := certificatesv1.KeyUsage(s)
		if slices.Contains(leafForbiddenUsages, u) {
			return d, fmt.Errorf("%w: usage %q is reserved for CA certificates; this signer issues only leaf certificates", ErrPolicyViolation, s)
		}
		if ku, ok := keyUsages[u]; ok {
			d.keyUsage |= ku
		} else if eku, ok := extKeyUsages[u]; ok {
			ekus[eku] = true
		} else {
			return d, fmt.Errorf("%w: unknown usage %q", ErrPolicyViolation, s)
		}
	}
	for eku := range ekus {
		d.extKeyUsage = append(d.extKeyUsage, eku)
	}
	slices.Sort(d.extKeyUsage)
	if err := checkNotCA(csr); err != nil {
		return d, err
	}
	d.lifetime = p.lifetime(req.ExpirationSeconds)
	return d, nil
}

// checkNotCA refuses a request whose extensions ask for a CA certificate. The issued
// certificate never carries requested extensions, so this is about telling the requester
// plainly that the request cannot be met, not about what ends up in the certificate.
func checkNotCA(csr *x509.CertificateRequest) error {
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

// lifetime clamps the requested lifetime the way kube-controller-manager does.
func (p Policy) lifetime(expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return p.MaxLifetime
	}
	requested := time.Duration(*expirationSeconds) * time.Second
	switch {
	case requested > p.MaxLifetime:
		return p.MaxLifetime
	case requested < MinLifetime:
		return MinLifetime
	default:
		return requested
	}
}

package issuance_test

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
)

var oidSAN = asn1.ObjectIdentifier{2, 5, 29, 17}

// TestIssuePodCertificate: for every key type the kube-apiserver allows, a pod certificate
// passes the default lint gate and has exactly the promised contents: no subject, one
// critical URI SAN naming the service account, key usage digital signature (plus key
// encipherment for RSA only), extended key usage server and client auth, CA:FALSE, the
// authority key identifier, a 129-bit serial, and the pod's key; the chain verifies for both
// TLS roles.
func TestIssuePodCertificate(t *testing.T) {
	t.Parallel()
	ca := testpki.CA(t)
	is := podIssuer(t, caOf(ca), 24*time.Hour, now)
	const wantURI = "spiffe://cluster.local/ns/shop/sa/web"
	for _, kt := range podKeyTypes {
		t.Run(kt, func(t *testing.T) {
			t.Parallel()
			key := podKey(t, kt)
			cert, err := is.IssuePod(podRequest(t, key))
			if err != nil {
				t.Fatalf("IssuePod: %v", err)
			}
			leaf := cert.Leaf
			if !bytes.Equal(leaf.RawSubject, []byte{0x30, 0x00}) {
				t.Errorf("subject = %q, want empty", leaf.Subject)
			}
			if len(leaf.URIs) != 1 || leaf.URIs[0].String() != wantURI || len(leaf.DNSNames)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 {
				t.Errorf("SANs = URIs %v DNS %v IP %v email %v, want exactly the URI %s", leaf.URIs, leaf.DNSNames, leaf.IPAddresses, leaf.EmailAddresses, wantURI)
			}
			for _, ext := range leaf.Extensions {
				if ext.Id.Equal(oidSAN) && !ext.Critical {
					t.Error("the SAN extension is not critical although the subject is empty (RFC 5280 4.2.1.6)")
				}
			}
			wantKU := x509.KeyUsageDigitalSignature
			if _, ok := key.Public().(*rsa.PublicKey); ok {
				wantKU |= x509.KeyUsageKeyEncipherment
			}
			if leaf.KeyUsage != wantKU {
				t.Errorf("key usage = %b, want %b", leaf.KeyUsage, wantKU)
			}
			if want := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}; !slices.Equal(leaf.ExtKeyUsage, want) {
				t.Errorf("extended key usage = %v, want %v", leaf.ExtKeyUsage, want)
			}
			if !leaf.BasicConstraintsValid || leaf.IsCA {
				t.Error("the certificate is not CA:FALSE")
			}
			if len(ca.Cert.SubjectKeyId) == 0 || !bytes.Equal(leaf.AuthorityKeyId, ca.Cert.SubjectKeyId) {
				t.Errorf("authority key id = %x, want the CA's subject key id %x", leaf.AuthorityKeyId, ca.Cert.SubjectKeyId)
			}
			if leaf.SerialNumber.BitLen() != 129 {
				t.Errorf("serial %x has %d bits, want 129 (0x01 and 128 random bits)", leaf.SerialNumber, leaf.SerialNumber.BitLen())
			}
			if !samePublicKey(key.Public(), leaf.PublicKey) {
				t.Error("the certificate is for another key")
			}
			for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				verify(t, parseChain(t, cert.ChainPEM), usage, ca.Cert)
			}
		})
	}
}

// TestIssuePodValidity: NotBefore is one minute before signing in whole seconds; the lifetime
// is min(maxExpirationSeconds, maxLifetime) from there, clamped to the CA's NotAfter; a result
// under an hour is refused as a policy violation naming the reason; beginRefreshAt is a third
// of the lifetime (at least 30 minutes) before NotAfter and within the kube-apiserver's
// window [NotBefore+10m, NotAfter−10m].
func TestIssuePodValidity(t *testing.T) {
	t.Parallel()
	at := now.Add(1234 * time.Millisecond) // sub-second signing time
	wantNB := now.Add(-time.Minute).Add(time.Second)
	tests := []struct {
		name         string
		maxLifetime  time.Duration
		caNotAfter   time.Time
		maxExp       int32
		wantNotAfter time.Time
		wantRefresh  time.Time
		refusal      string // substring of a POLICY_VIOLATION message; "" when issued
	}{
		{"1h", 24 * time.Hour, testpki.NotAfter, 3600, wantNB.Add(time.Hour), wantNB.Add(30 * time.Minute), ""},
		{"24h", 24 * time.Hour, testpki.NotAfter, 86400, wantNB.Add(24 * time.Hour), wantNB.Add(16 * time.Hour), ""},
		{"capped by maxLifetime", 2 * time.Hour, testpki.NotAfter, 86400, wantNB.Add(2 * time.Hour), wantNB.Add(80 * time.Minute), ""},
		{"91 days requested, 24h maximum", 24 * time.Hour, testpki.NotAfter, 91 * 86400, wantNB.Add(24 * time.Hour), wantNB.Add(16 * time.Hour), ""},
		{"clamped to the CA's NotAfter", 24 * time.Hour, now.Add(90 * time.Minute), 86400, now.Add(90 * time.Minute), now.Add(59*time.Minute + 40*time.Second), ""}, // a third of 90m59s before NotAfter
		{"CA expires too soon", 24 * time.Hour, now.Add(30 * time.Minute), 86400, time.Time{}, time.Time{}, "the CA certificate expires at"},
		{"maxExpirationSeconds under an hour", 24 * time.Hour, testpki.NotAfter, 1800, time.Time{}, time.Time{}, "under the 1h0m0s the kube-apiserver requires"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ca := testpki.CA(t, func(c *x509.Certificate) { c.NotAfter = tt.caNotAfter })
			is := podIssuer(t, caOf(ca), tt.maxLifetime, at)
			req := podRequest(t, testpki.Key(t, testpki.P256))
			req.MaxExpirationSeconds = tt.maxExp
			cert, err := is.IssuePod(req)
			if tt.refusal != "" {
				wantSentinel(t, err, issuance.ErrPolicyViolation)
				if !strings.Contains(err.Error(), tt.refusal) || !strings.Contains(err.Error(), "1h") {
					t.Errorf("refusal %q does not say %q and name the 1h floor", err, tt.refusal)
				}
				return
			}
			if err != nil {
				t.Fatalf("IssuePod: %v", err)
			}
			leaf := cert.Leaf
			if !leaf.NotBefore.Equal(wantNB) || !leaf.NotAfter.Equal(tt.wantNotAfter) {
				t.Errorf("validity %s..%s, want %s..%s", leaf.NotBefore, leaf.NotAfter, wantNB, tt.wantNotAfter)
			}
			if !cert.BeginRefreshAt.Equal(tt.wantRefresh) {
				t.Errorf("beginRefreshAt = %s, want %s", cert.BeginRefreshAt, tt.wantRefresh)
			}
			if lo, hi := leaf.NotBefore.Add(10*time.Minute), leaf.NotAfter.Add(-10*time.Minute); cert.BeginRefreshAt.Before(lo) || cert.BeginRefreshAt.After(hi) {
				t.Errorf("beginRefreshAt %s outside the kube-apiserver's window [%s, %s]", cert.BeginRefreshAt, lo, hi)
			}
			if d := leaf.NotAfter.Sub(leaf.NotBefore); d < time.Hour || d > time.Duration(tt.maxExp)*time.Second {
				t.Errorf("lifetime %s outside [1h, maxExpirationSeconds]", d)
			}
			if leaf.NotAfter.After(ca.Cert.NotAfter) {
				t.Errorf("NotAfter %s is past the CA's %s", leaf.NotAfter, ca.Cert.NotAfter)
			}
		})
	}
}

// TestBeginRefreshAt: for every lifetime the kube-apiserver accepts (1h to 91 days, in
// seconds), the refresh time is in whole seconds, inside its window and at least 30 minutes
// before NotAfter.
func TestBeginRefreshAt(t *testing.T) {
	t.Parallel()
	nb := now.Add(-time.Minute)
	for d := time.Hour; d <= 91*24*time.Hour; d += 7*time.Hour + 13*time.Minute + 17*time.Second {
		na := nb.Add(d)
		at := issuance.BeginRefreshAt(nb, na)
		if at.Before(nb.Add(10*time.Minute)) || at.After(na.Add(-30*time.Minute)) || !at.Equal(at.Truncate(time.Second)) {
			t.Fatalf("lifetime %s: beginRefreshAt %s is not in [NotBefore+10m, NotAfter−30m] in whole seconds", d, at.Sub(nb))
		}
		if want := na.Add(-max(d/3, 30*time.Minute)).Truncate(time.Second); !at.Equal(want) {
			t.Fatalf("lifetime %s: beginRefreshAt = NotBefore+%s, want NotBefore+%s", d, at.Sub(nb), want.Sub(nb))
		}
	}
}

// TestIssueKindMismatch: a pod-identity signer refuses a CertificateSigningRequest and any other
// signer refuses a PodCertificateRequest, with a policy violation that names the signer, the
// kind it serves and its profile, before the request is even parsed.
func TestIssueKindMismatch(t *testing.T) {
	t.Parallel()
	ca := caOf(testpki.CA(t))
	pods := podIssuer(t, ca, 24*time.Hour, now)
	csrs := newIssuer(t, ca, 24*time.Hour)
	key := testpki.Key(t, testpki.P256)

	_, err := pods.Issue(issuance.Request{SignerName: podSigner, PEM: testpki.CSR(t, key, nil), Usages: []string{"digital signature"}})
	wantSentinel(t, err, issuance.ErrPolicyViolation)
	for _, want := range []string{podSigner, "PodCertificateRequests only", "pod-identity", "not CertificateSigningRequests"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CSR refusal %q does not say %q", err, want)
		}
	}
	_, err = pods.Issue(issuance.Request{SignerName: podSigner, PEM: []byte("not a request")})
	wantSentinel(t, err, issuance.ErrPolicyViolation)

	req := podRequest(t, key)
	req.SignerName = signerName
	_, err = csrs.IssuePod(req)
	wantSentinel(t, err, issuance.ErrPolicyViolation)
	for _, want := range []string{signerName, "CertificateSigningRequests only", "profile legacy-unknown", "not PodCertificateRequests"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("PCR refusal %q does not say %q", err, want)
		}
	}
	e := csrs.ExplainPod(req)
	if len(e.Rules) != 1 || e.Rules[0].Passed || !strings.HasPrefix(e.Rules[0].Rule, "kind:") {
		t.Errorf("explained rules %+v, want the one failed kind rule", e.Rules)
	}
}

// TestExplainPod: a dry run reports every pod-identity rule and the lint gate, passing for a
// good request; for a refused one the failing rule and the refusal, and nothing is signed.
func TestExplainPod(t *testing.T) {
	t.Parallel()
	is := podIssuer(t, caOf(testpki.CA(t)), 24*time.Hour, now)
	req := podRequest(t, testpki.Key(t, testpki.Ed25519))
	e := is.ExplainPod(req)
	if e.Err != nil || e.Lifetime != 24*time.Hour || len(e.Rules) < 6 {
		t.Fatalf("explanation %+v, want allowed, 24h, every rule", e)
	}
	for _, r := range e.Rules {
		if !r.Passed || r.Detail == "" {
			t.Errorf("rule %q passed=%t detail %q", r.Rule, r.Passed, r.Detail)
		}
	}
	if last := e.Rules[len(e.Rules)-1]; !strings.HasPrefix(last.Rule, "lint:") {
		t.Errorf("last rule %q is not the lint gate", last.Rule)
	}
	req.UnverifiedUserAnnotations = map[string]string{"example.com/b": "1", "example.com/a": "2"}
	e = is.ExplainPod(req)
	wantSentinel(t, e.Err, issuance.ErrUnknownAnnotation)
	failed := slices.IndexFunc(e.Rules, func(r issuance.RuleResult) bool { return !r.Passed })
	if failed < 0 || !strings.HasPrefix(e.Rules[failed].Rule, "annotations:") || !strings.Contains(e.Rules[failed].Detail, `["example.com/a" "example.com/b"]`) {
		t.Errorf("rules %+v, want the annotations rule failing with the sorted keys", e.Rules)
	}
}

// TestIssuePodStubContents: a stub request carrying anything the kubelet never sends is
// refused as a policy violation naming what it carries, and nothing of it reaches a
// certificate.
func TestIssuePodStubContents(t *testing.T) {
	t.Parallel()
	is := podIssuer(t, caOf(testpki.CA(t)), 24*time.Hour, now)
	key := testpki.Key(t, testpki.P256)
	tests := []struct {
		name string
		tmpl *x509.CertificateRequest
		want string
	}{
		{"common name", &x509.CertificateRequest{Subject: pkix.Name{CommonName: "admin"}}, `subject "CN=admin"`},
		{"DNS SAN", &x509.CertificateRequest{DNSNames: []string{"evil.example.com"}}, "extension 2.5.29.17 (subject alternative name)"},
		{"CA request", nil, "extension 2.5.29.19 (basic constraints)"},
		{"challenge password", &x509.CertificateRequest{Attributes: []pkix.AttributeTypeAndValueSET{{
			Type: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 7}, Value: [][]pkix.AttributeTypeAndValue{{{Type: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 7}, Value: "secret"}}},
		}}}, "attribute 1.2.840.113549.1.9.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := podRequest(t, key)
			if tt.tmpl == nil {
				req.StubPKCS10Request = pemToDER(t, testpki.CARequestCSR(t, key))
			} else {
				req.StubPKCS10Request = stub(t, key, tt.tmpl)
			}
			_, err := is.IssuePod(req)
			wantSentinel(t, err, issuance.ErrPolicyViolation)
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "stub") {
				t.Errorf("refusal %q does not name %q in the stub request", err, tt.want)
			}
		})
	}
}

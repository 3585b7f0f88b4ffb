package integration

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	zx509 "github.com/zmap/zcrypto/x509"
	"github.com/zmap/zlint/v3"
	zl "github.com/zmap/zlint/v3/lint"

	"github.com/signet-pki/signet/internal/certinfo"
	"github.com/signet-pki/signet/internal/testpki"
)

// Tolerances of the comparison: certificates are signed at different moments, and X.509
// times have whole seconds.
const (
	lifetimeSlack = 3 * time.Second
	kcmBackdate   = 5 * time.Minute // kube-controller-manager's NotBefore = signing time − 5 min
)

// certDiffs lists the fields in which Signet's certificate differs from kube-controller-
// manager's, as a user of the certificate sees them, each "field: KCM x, Signet y". Issuer,
// serial, validity instants, the authority key ID's value and the signature differ by nature
// (two CAs, two moments) and are not compared; the lifetime is, within lifetimeSlack.
func certDiffs(kcm, signet *x509.Certificate) []string {
	var diffs []string
	field := func(name string, k, s any) {
		if ks, ss := fmt.Sprint(k), fmt.Sprint(s); ks != ss {
			diffs = append(diffs, fmt.Sprintf("%s: KCM %s, Signet %s", name, ks, ss))
		}
	}
	field("subject", kcm.Subject, signet.Subject)
	field("subject common name", fmt.Sprintf("%q", kcm.Subject.CommonName), fmt.Sprintf("%q", signet.Subject.CommonName))
	field("subject organizations", fmt.Sprintf("%q", kcm.Subject.Organization), fmt.Sprintf("%q", signet.Subject.Organization))
	field("subject DER", fmt.Sprintf("%x", kcm.RawSubject), fmt.Sprintf("%x", signet.RawSubject))
	field("DNS SANs", kcm.DNSNames, signet.DNSNames)
	field("IP SANs", kcm.IPAddresses, signet.IPAddresses)
	field("email SANs", kcm.EmailAddresses, signet.EmailAddresses)
	field("URI SANs", kcm.URIs, signet.URIs)
	field("key usage", certinfo.KeyUsages(kcm.KeyUsage), certinfo.KeyUsages(signet.KeyUsage))
	field("extended key usage", certinfo.ExtKeyUsages(kcm.ExtKeyUsage), certinfo.ExtKeyUsages(signet.ExtKeyUsage))
	field("unknown extended key usage", kcm.UnknownExtKeyUsage, signet.UnknownExtKeyUsage)
	field("basic constraints present", kcm.BasicConstraintsValid, signet.BasicConstraintsValid)
	field("CA", kcm.IsCA, signet.IsCA)
	field("path length", kcm.MaxPathLen, signet.MaxPathLen)
	field("subject key ID present", len(kcm.SubjectKeyId) > 0, len(signet.SubjectKeyId) > 0)
	field("authority key ID present", len(kcm.AuthorityKeyId) > 0, len(signet.AuthorityKeyId) > 0)
	field("extensions (OID, critical)", extensionList(kcm), extensionList(signet))
	field("extension values (but the authority key ID's)", extensionValues(kcm), extensionValues(signet))
	field("public key algorithm", kcm.PublicKeyAlgorithm, signet.PublicKeyAlgorithm)
	field("version", kcm.Version, signet.Version)
	field("signature algorithm (both CAs P-256)", kcm.SignatureAlgorithm, signet.SignatureAlgorithm)
	if k, s := kcm.NotAfter.Sub(kcm.NotBefore), signet.NotAfter.Sub(signet.NotBefore); absDuration(k-s) > lifetimeSlack {
		diffs = append(diffs, fmt.Sprintf("lifetime (NotAfter-NotBefore): KCM %s, Signet %s", k, s))
	}
	return diffs
}

// oidAuthorityKeyID is the authority key identifier extension, whose value names the CA.
var oidAuthorityKeyID = asn1.ObjectIdentifier{2, 5, 29, 35}

// extensionList lists cert's extensions as "OID" or "OID critical", sorted.
func extensionList(cert *x509.Certificate) []string {
	out := make([]string, 0, len(cert.Extensions))
	for _, e := range cert.Extensions {
		s := e.Id.String()
		if e.Critical {
			s += " critical"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// extensionValues lists cert's extensions but the authority key ID as "OID=hex value",
// sorted: the encoding of what both certificates should say alike.
func extensionValues(cert *x509.Certificate) []string {
	var out []string
	for _, e := range cert.Extensions {
		if !e.Id.Equal(oidAuthorityKeyID) {
			out = append(out, fmt.Sprintf("%s=%x", e.Id, e.Value))
		}
	}
	slices.Sort(out)
	return out
}

// checkSerials checks the one deliberate difference between certificates both sides issue:
// the serial number's form. kube-controller-manager draws a random number below 2^128 (so its
// length varies); Signet puts a fixed 0x01 octet before 128 random bits (server/issuance,
// Issuer.serial), so its serials always have 129 bits and 17 octets. Both carry 128 random
// bits and fit RFC 5280's 20 octets; no client reads more into a serial.
func checkSerials(t *testing.T, kcm, signet *x509.Certificate) {
	t.Helper()
	if n := kcm.SerialNumber.BitLen(); n > 128 {
		t.Errorf("KCM serial %x has %d bits, want a random number below 2^128", kcm.SerialNumber, n)
	}
	if n := signet.SerialNumber.BitLen(); n != 129 {
		t.Errorf("Signet serial %x has %d bits, want 129 (0x01, then 128 random bits)", signet.SerialNumber, n)
	}
}

// describeCert summarizes what certDiffs compares, for the test log.
func describeCert(c *x509.Certificate) string {
	return fmt.Sprintf("subject %s, DNS %v, IP %v, email %v, URI %v, key usage %v, ext key usage %v, CA %v (basic constraints %v), "+
		"lifetime %s, extensions %v, subject key ID %v, serial %d bits, signature %s",
		c.Subject, c.DNSNames, c.IPAddresses, c.EmailAddresses, c.URIs, certinfo.KeyUsages(c.KeyUsage), certinfo.ExtKeyUsages(c.ExtKeyUsage),
		c.IsCA, c.BasicConstraintsValid, c.NotAfter.Sub(c.NotBefore), extensionList(c), len(c.SubjectKeyId) > 0,
		c.SerialNumber.BitLen(), c.SignatureAlgorithm)
}

// checkChain parses the chain who issued: one leaf (no intermediates on either side), for the
// request's key pub, chaining to ca, with a positive serial of at most 20 octets and the
// case's lifetime. It returns the leaf.
func checkChain(t *testing.T, who string, chainPEM []byte, ca *x509.Certificate, pub crypto.PublicKey, lifetime time.Duration) *x509.Certificate {
	t.Helper()
	chain := parseChain(t, chainPEM)
	leaf := chain[0]
	if len(chain) != 1 {
		t.Errorf("%s: chain of %d certificates, want the leaf only", who, len(chain))
	}
	if k, ok := pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !k.Equal(leaf.PublicKey) {
		t.Errorf("%s: the certificate is not for the request's key", who)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("%s: the certificate does not chain to its CA: %v", who, err)
	}
	if s := leaf.SerialNumber; s.Sign() <= 0 || s.BitLen() > 159 {
		t.Errorf("%s: serial %x, want positive and at most 20 octets (RFC 5280)", who, s)
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); absDuration(got-lifetime) > lifetimeSlack {
		t.Errorf("%s: lifetime (NotAfter-NotBefore) %s, want %s", who, got, lifetime)
	}
	return leaf
}

// checkBackdate checks that cert's NotBefore is kcmBackdate before a signing time between
// from and to (X.509 times are truncated to the second).
func checkBackdate(t *testing.T, who string, cert *x509.Certificate, from, to time.Time) {
	t.Helper()
	earliest, latest := from.Add(-kcmBackdate-lifetimeSlack), to.Add(-kcmBackdate+lifetimeSlack)
	if cert.NotBefore.Before(earliest) || cert.NotBefore.After(latest) {
		t.Errorf("%s: NotBefore %s is not %s before signing (signed between %s and %s)",
			who, cert.NotBefore.Format(time.RFC3339), kcmBackdate, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
}

// checkLintFlags checks that lint flags cert (Warn, Error or Fatal), as a case that names
// the lint claims: the case tests what the lint gate does with that finding.
func checkLintFlags(t *testing.T, cert *x509.Certificate, name string) {
	t.Helper()
	zc, err := zx509.ParseCertificate(cert.Raw)
	if err != nil {
		t.Fatalf("zcrypto parsing the certificate: %v", err)
	}
	reg, err := zl.GlobalRegistry().Filter(zl.FilterOptions{IncludeNames: []string{name}})
	if err != nil {
		t.Fatalf("lint %s: %v", name, err)
	}
	r := zlint.LintCertificateEx(zc, reg).Results[name]
	if r == nil || r.Status < zl.Warn {
		t.Errorf("the case says lint %s flags this certificate, but it finds nothing (%v)", name, r)
	}
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// TestCertDiffs checks that the differential comparison notices a difference a user would
// see and names the field with both values.
func TestCertDiffs(t *testing.T) {
	ca := testpki.CA(t)
	key := testpki.Key(t, testpki.P256)
	base := func() *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: "system:node:worker-a", Organization: []string{"system:nodes"}},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			BasicConstraintsValid: true, NotBefore: time.Unix(1e9, 0), NotAfter: time.Unix(1e9, 0).Add(time.Hour)}
	}
	kcm := ca.Sign(t, base(), key.Public())
	if diffs := certDiffs(kcm, ca.Sign(t, base(), key.Public())); len(diffs) != 0 {
		t.Errorf("equal certificates differ: %q", diffs)
	}
	other := base()
	other.KeyUsage |= x509.KeyUsageKeyEncipherment
	other.SubjectKeyId = []byte{1, 2, 3}
	other.NotAfter = other.NotAfter.Add(time.Minute)
	other.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	diffs := strings.Join(certDiffs(kcm, ca.Sign(t, other, key.Public())), "\n")
	for _, want := range []string{
		"key usage: KCM [digital signature], Signet [digital signature key encipherment]",
		"extended key usage: KCM [client auth], Signet [server auth client auth]",
		"subject key ID present: KCM false, Signet true",
		"extension values (but the authority key ID's): KCM [",
		"lifetime (NotAfter-NotBefore): KCM 1h0m0s, Signet 1h1m0s",
	} {
		if !strings.Contains(diffs, want) {
			t.Errorf("differences %q lack %q", diffs, want)
		}
	}
}

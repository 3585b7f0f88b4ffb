package issuance_test

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile"
)

// now is the fake clock's fixed time in every issuance test.
var now = time.Date(2030, time.June, 15, 12, 0, 0, 0, time.UTC)

const signerName = "example.com/serving"

// sentinels are the errors every refusal must wrap exactly one of.
var sentinels = []error{
	issuance.ErrMalformedRequest,
	issuance.ErrInvalidSignature,
	issuance.ErrUnsupportedKey,
	issuance.ErrPolicyViolation,
	issuance.ErrUnknownAnnotation,
}

// newIssuer returns an issuer for signerName over ca, with a fake clock fixed at now.
func newIssuer(t testing.TB, ca *issuance.CA, maxLifetime time.Duration) *issuance.Issuer {
	t.Helper()
	is, err := issuance.NewIssuer(issuance.IssuerOptions{
		SignerName: signerName,
		CA:         ca,
		Policy:     leafPolicy(t, maxLifetime),
		Clock:      testclock.NewFakePassiveClock(now),
	})
	if err != nil {
		t.Fatalf("NewIssuer: %v", err)
	}
	return is
}

// caOf turns a test authority into an issuance CA.
func caOf(a *testpki.Authority) *issuance.CA {
	return &issuance.CA{Certificate: a.Cert, Key: a.Key}
}

// request is a request for signerName with the given usages and no expirationSeconds.
func request(csrPEM []byte, usages ...string) issuance.Request {
	return issuance.Request{SignerName: signerName, PEM: csrPEM, Usages: usages}
}

// wantSentinel fails t unless err wraps want and no other sentinel.
func wantSentinel(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want one wrapping %q", err, want)
	}
	for _, s := range sentinels {
		if s != want && errors.Is(err, s) {
			t.Fatalf("error %v wraps %q as well as %q", err, s, want)
		}
	}
}

// parseChain decodes every CERTIFICATE block of a PEM chain.
func parseChain(t testing.TB, chainPEM []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	rest := chainPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			t.Fatalf("chain holds a %q block", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("parsing chain certificate: %v", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		t.Fatal("chain holds no certificate")
	}
	return certs
}

// verify checks that chain (leaf first) verifies against roots at now for usage.
func verify(t testing.TB, chain []*x509.Certificate, usage x509.ExtKeyUsage, roots ...*x509.Certificate) {
	t.Helper()
	rootPool, interPool := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		rootPool.AddCert(r)
	}
	for _, c := range chain[1:] {
		interPool.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         rootPool,
		Intermediates: interPool,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	}); err != nil {
		t.Fatalf("issued chain does not verify: %v", err)
	}
}

// samePublicKey reports whether a and b are the same public key.
func samePublicKey(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// leafPolicy is the legacy-unknown profile: any subject, SANs honored, any leaf usage, no CA,
// lifetime clamped to [10m, maxLifetime] — the plainest policy, so the tests here see the
// pipeline itself.
func leafPolicy(t testing.TB, maxLifetime time.Duration) issuance.Policy {
	t.Helper()
	p, err := profile.New(profile.Spec{Name: profile.NameLegacyUnknown}, maxLifetime)
	if err != nil {
		t.Fatalf("profile.New: %v", err)
	}
	return p
}

package lint

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/certsign"
	zx509 "github.com/zmap/zcrypto/x509"
	zl "github.com/zmap/zlint/v3/lint"
)

// TestRunnerMatchesZlint: the reused, pre-configured lint instances give, lint by lint, the
// same status and details as zlint's own CertificateLint.Execute (a fresh instance per call),
// over every zlint source and a sequence of certificates that pass and fail in turn, each run
// on the same instance set, so state left behind by one certificate would show on the next.
func TestRunnerMatchesZlint(t *testing.T) {
	reg, err := zl.GlobalRegistry().Filter(zl.FilterOptions{ExcludeNames: []string{alwaysExcluded[0].Lint}})
	if err != nil {
		t.Fatal(err)
	}
	lints, config := reg.CertificateLints().Lints(), reg.GetConfiguration()
	r, err := newRunner(lints, config)
	if err != nil {
		t.Fatal(err)
	}
	set, err := r.newSet() // one instance set, reused for every certificate below
	if err != nil {
		t.Fatal(err)
	}
	ca := testpki.CA(t)
	now := time.Date(2030, time.June, 15, 12, 0, 0, 0, time.UTC)
	certs := []struct {
		name string
		tmpl *x509.Certificate
		pub  crypto.PublicKey
	}{
		{"server", &x509.Certificate{Subject: pkix.Name{CommonName: "node-1"}, DNSNames: []string{"node-1", "node-1.example.com"},
			IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, testpki.Key(t, testpki.P256).Public()},
		{"bad SANs, weak key", &x509.Certificate{Subject: pkix.Name{CommonName: strings.Repeat("a", 65)}, DNSNames: []string{"a.*.bad_name..example"},
			EmailAddresses: []string{"not an address"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection}}, testpki.Key(t, testpki.RSA1024).Public()},
		{"client", &x509.Certificate{Subject: pkix.Name{CommonName: "alice", Organization: []string{"dev"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, testpki.Key(t, testpki.RSA2048).Public()},
		{"inverted validity", &x509.Certificate{Subject: pkix.Name{CommonName: "bob"}, NotAfter: now.Add(-time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, testpki.Key(t, testpki.P384).Public()},
		{"server again", &x509.Certificate{Subject: pkix.Name{CommonName: "node-2"}, DNSNames: []string{"node-2"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, testpki.Key(t, testpki.Ed25519).Public()},
	}
	placeholder, err := placeholderSignature(ca.Cert.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range certs {
		c.tmpl.SerialNumber = big.NewInt(int64(1000 + i))
		c.tmpl.NotBefore = now.Add(-5 * time.Minute)
		if c.tmpl.NotAfter.IsZero() {
			c.tmpl.NotAfter = now.Add(24 * time.Hour)
		}
		c.tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		c.tmpl.BasicConstraintsValid = true
		tbs, err := certsign.EncodeTBS(c.tmpl, ca.Cert, c.pub)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		der, err := certsign.Assemble(tbs, placeholder)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cert, err := zx509.ParseCertificate(der)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		failing := 0
		for j, l := range lints {
			g, want := execute(l, (*set)[j], cert), l.Execute(cert, config)
			if want.Status >= zl.Error {
				failing++
			}
			if g.Status != want.Status || g.Details != want.Details {
				t.Errorf("%s, %s: reused instance gave %v %q, zlint gave %v %q", c.name, l.Name, g.Status, g.Details, want.Status, want.Details)
			}
		}
		t.Logf("%s: %d lints, %d at Error or above", c.name, len(lints), failing)
		if strings.HasPrefix(c.name, "bad") && failing == 0 {
			t.Errorf("%s: no lint fails, so the comparison does not cover failures", c.name)
		}
	}
}

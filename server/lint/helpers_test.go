package lint_test

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
)

// now is the issuance time of every test leaf.
var now = time.Date(2030, time.June, 15, 12, 0, 0, 0, time.UTC)

// testCA is a self-signed CA of one key type, as a parsed certificate and its key.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// newCA returns a self-signed CA whose key is of type kt. Go gives it a SubjectKeyId, so leaves
// it signs carry an authority key identifier.
func newCA(t testing.TB, kt testpki.KeyType) testCA {
	t.Helper()
	a := testpki.CAOf(t, kt, func(c *x509.Certificate) {
		c.Subject = pkix.Name{CommonName: "signet test CA " + string(kt), Organization: []string{"Signet"}}
	})
	if len(a.Cert.SubjectKeyId) == 0 {
		t.Fatalf("%s CA has no SubjectKeyId", kt)
	}
	return testCA{cert: a.Cert, key: a.Key}
}

// sign signs tmpl for pub with the CA's real key, as the issuer does after the lint gate.
func (ca testCA) sign(t testing.TB, tmpl *x509.Certificate, pub crypto.PublicKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatalf("signing with the real CA key: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parsing the real certificate: %v", err)
	}
	return cert
}

// serial returns a 17-octet serial as the issuer makes them: 0x01 then 128 random bits.
func serial(t testing.TB) *big.Int {
	t.Helper()
	b := make([]byte, 17)
	if _, err := rand.Read(b[1:]); err != nil {
		t.Fatal(err)
	}
	b[0] = 0x01
	return new(big.Int).SetBytes(b)
}

// leaf returns a leaf template as server/issuance builds one: no SKI, CA:FALSE, backdated
// 5 minutes, lifetime life.
func leaf(t testing.TB, subject pkix.Name, life time.Duration, eku x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	return &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               subject,
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(life - 5*time.Minute),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{eku},
		BasicConstraintsValid: true,
		IsCA:                  false,
	}
}

// clientCNOnly is a client certificate with a common name and no SAN.
func clientCNOnly(t testing.TB, life time.Duration) *x509.Certificate {
	return leaf(t, pkix.Name{CommonName: "alice"}, life, x509.ExtKeyUsageClientAuth)
}

// kubeletClient is a kubelet's client certificate: CN=system:node:<name>, O=system:nodes.
func kubeletClient(t testing.TB, life time.Duration) *x509.Certificate {
	return leaf(t, pkix.Name{CommonName: "system:node:node-1", Organization: []string{"system:nodes"}}, life, x509.ExtKeyUsageClientAuth)
}

// kubeletServing is a kubelet's serving certificate: the node's names and addresses as SANs.
func kubeletServing(t testing.TB, life time.Duration) *x509.Certificate {
	tmpl := leaf(t, pkix.Name{CommonName: "system:node:node-1", Organization: []string{"system:nodes"}}, life, x509.ExtKeyUsageServerAuth)
	tmpl.DNSNames = []string{"node-1", "node-1.cluster.internal"}
	tmpl.IPAddresses = []net.IP{net.ParseIP("10.0.0.17"), net.ParseIP("fd00::17")}
	return tmpl
}

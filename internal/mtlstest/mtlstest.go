// Package mtlstest makes the mTLS material of the client and watcher tests: a CA (from the project's
// testpki), a server TLS configuration requiring client certificates, and client certificate
// files on disk.
package mtlstest

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
)

// CA issues test server and client certificates.
type CA struct {
	*testpki.Authority
}

// NewCA returns a new P-256 CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	return &CA{Authority: testpki.CA(t)}
}

// Issue returns the PEM certificate and PKCS#8 key of a P-256 leaf named cn, for server auth
// (with cn and 127.0.0.1 as SANs) or client auth.
func (ca *CA) Issue(t testing.TB, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	eku := x509.ExtKeyUsageClientAuth
	if server {
		eku = x509.ExtKeyUsageServerAuth
	}
	cert, key := ca.issue(t, cn, eku, server)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("mtlstest: marshalling key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// Leaf returns a P-256 leaf for a server named name (name and 127.0.0.1 as SANs) with the
// extended key usage eku, ready for tls.Config.Certificates. A test of how clients verify
// servers passes another usage than server auth.
func (ca *CA) Leaf(t testing.TB, name string, eku x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	cert, key := ca.issue(t, name, eku, true)
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

// issue signs a P-256 leaf named cn with the extended key usage eku, with cn and 127.0.0.1
// as SANs if sans, and returns it with its key.
func (ca *CA) issue(t testing.TB, cn string, eku x509.ExtKeyUsage, sans bool) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key := testpki.Key(t, testpki.P256)
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{eku},
	}
	if sans {
		tmpl.DNSNames = []string{cn}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	return ca.Sign(t, tmpl, key.Public()), key
}

// ServerTLS returns a TLS 1.3 server configuration named name that requires a client
// certificate issued by ca.
func (ca *CA) ServerTLS(t testing.TB, name string) *tls.Config {
	t.Helper()
	return ca.RequireClients(ca.Leaf(t, name, x509.ExtKeyUsageServerAuth))
}

// RequireClients returns a TLS 1.3 server configuration presenting cert (which may come from
// another CA) and requiring a client certificate issued by ca.
func (ca *CA) RequireClients(cert tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}

// ClientFiles writes the CA bundle (ca.pem) and a client pair named cn (client.pem,
// client-key.pem) into dir and returns their paths.
func (ca *CA) ClientFiles(t testing.TB, dir, cn string) (caFile, certFile, keyFile string) {
	t.Helper()
	caFile = filepath.Join(dir, "ca.pem")
	certFile = filepath.Join(dir, "client.pem")
	keyFile = filepath.Join(dir, "client-key.pem")
	WriteFile(t, caFile, ca.CertPEM())
	certPEM, keyPEM := ca.Issue(t, cn, false)
	WriteFile(t, certFile, certPEM)
	WriteFile(t, keyFile, keyPEM)
	return caFile, certFile, keyFile
}

// WriteFile writes data to path or fails the test.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("mtlstest: writing %s: %v", path, err)
	}
}

// Package mtlstest makes the mTLS material of the watcher's tests: a CA (from the project's
// testpki), a server TLS configuration requiring client certificates, and client certificate
// files on disk.
package mtlstest

import (
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
	key := testpki.Key(t, testpki.P256)
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{cn}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	cert := ca.Sign(t, tmpl, key.Public())
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("mtlstest: marshalling key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// ServerTLS returns a TLS 1.3 server configuration named name that requires a client
// certificate issued by ca.
func (ca *CA) ServerTLS(t testing.TB, name string) *tls.Config {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, name, true)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("mtlstest: server pair: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
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

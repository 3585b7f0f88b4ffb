package server_test

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore/pemfile"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

func replace(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestReloadSwapsSignerCA: replacing the signer's CA files switches issuance to the new CA
// without failing a single call made during the swap, and a broken replacement keeps the
// previous CA serving.
func TestReloadSwapsSignerCA(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	oldCA := parsePEMCerts(t, s.read(t, devpki.SignerCACert))[0]
	newCA := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "rotated signer CA"} })

	// Keep signing while the CA is swapped: every call must succeed.
	var failures atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{DNSNames: []string{"svc.example"}})
				if _, err := client.SignCertificateSigningRequest(callContext(t), signRequest(csr, uidFor(i, n))); err != nil {
					t.Errorf("sign during reload: %v", err)
					failures.Add(1)
				}
			}
		}()
	}
	replacePair(t, s.dir, devpki.SignerCACert, devpki.SignerCAKey, newCA.Cert, newCA.Key)
	s.srv.Reload(context.Background())
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d calls failed during the reload", failures.Load())
	}

	leaf := signOne(t, client)
	if err := leaf.CheckSignatureFrom(newCA.Cert); err != nil {
		t.Fatalf("after reload the leaf is not signed by the new CA: %v", err)
	}
	if leaf.CheckSignatureFrom(oldCA) == nil {
		t.Fatal("after reload the leaf still verifies with the old CA")
	}

	// A broken replacement (certificate without its key) is refused; the new CA keeps serving.
	replace(t, filepath.Join(s.dir, devpki.SignerCACert), oldCA.Raw) // DER, not PEM
	s.srv.Reload(context.Background())
	if err := signOne(t, client).CheckSignatureFrom(newCA.Cert); err != nil {
		t.Fatalf("a broken CA file replaced the working CA: %v", err)
	}
	if !s.logs.Contains("keeping the previous CA") {
		t.Error("the failed reload was not logged")
	}
}

// TestReloadSwapsServerCertificate: a new server certificate is presented to new connections.
func TestReloadSwapsServerCertificate(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	tlsCAKey, err := pemfile.ParsePrivateKeyPEM(s.read(t, "tls-ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	tlsCA := &testpki.Authority{Cert: parsePEMCerts(t, s.read(t, devpki.TLSCACert))[0], Key: tlsCAKey}
	key := testpki.Key(t, testpki.P256)
	cert := tlsCA.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "rotated-server"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, key.Public())
	replacePair(t, s.dir, devpki.ServerCert, "server.key", cert, key)
	s.srv.Reload(context.Background())

	cfg := s.clientTLS(t, s.devClient(t))
	cfg.ServerName = "localhost"
	conn, err := tls.Dial("tcp", s.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "rotated-server" {
		t.Fatalf("server presents %q after reload, want rotated-server", got)
	}
}

// replacePair replaces a certificate and its key file, key first, each atomically.
func replacePair(t *testing.T, dir, certName, keyName string, cert *x509.Certificate, key crypto.Signer) {
	t.Helper()
	keyPEM, err := pemfile.MarshalPrivateKeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	replace(t, filepath.Join(dir, keyName), keyPEM)
	replace(t, filepath.Join(dir, certName), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
}

// signOne signs a fresh P-256 request and returns the leaf.
func signOne(t *testing.T, client signetv1.SignerServiceClient) *x509.Certificate {
	t.Helper()
	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{DNSNames: []string{"svc.example"}})
	resp, err := client.SignCertificateSigningRequest(callContext(t), signRequest(csr, "one-"+time.Now().Format(time.RFC3339Nano)))
	if err != nil {
		t.Fatal(err)
	}
	return parsePEMCerts(t, []byte(resp.GetCertificateChainPem()))[0]
}

func uidFor(worker, n int) string { return fmt.Sprintf("reload-%d-%d", worker, n) }

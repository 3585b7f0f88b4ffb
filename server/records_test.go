package server_test

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/access"
)

// otherIdentity is a second client of the dev server in these tests.
const otherIdentity = "spiffe://signet.test/other"

// otherClient issues a client certificate for otherIdentity from the dev TLS CA in dir.
func otherClient(t *testing.T, dir string) tls.Certificate {
	t.Helper()
	ca, err := tls.LoadX509KeyPair(filepath.Join(dir, devpki.TLSCACert), filepath.Join(dir, devpki.TLSCAKey))
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key := testpki.Key(t, testpki.P256)
	u, _ := url.Parse(otherIdentity)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "other"}, URIs: []*url.URL{u},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, key.Public(), ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), testpki.KeyPEM(t, key))
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestFindRecords: a client finds the ledger records of its own calls by object UID or
// serial number, another client does not see them unless it administers the signer, and
// GetServerInfo names the build.
func TestFindRecords(t *testing.T) {
	t.Parallel()
	cfg, dir := devConfig(t)
	cfg.Clients = append(cfg.Clients, access.Client{Identity: otherIdentity, Signers: []string{access.AllSigners}})
	s, _ := runServer(t, cfg, dir)
	conn := s.dial(t, s.clientTLS(t, s.devClient(t)))
	signer, ledgerAPI := signetv1.NewSignerServiceClient(conn), signetv1.NewLedgerServiceClient(conn)

	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{DNSNames: []string{"svc.example"}})
	signed, err := signer.SignCertificateSigningRequest(callContext(t), signRequest(csr, "uid-find"))
	if err != nil {
		t.Fatal(err)
	}
	bad := signRequest([]byte("not a CSR"), "uid-find-bad")
	_, err = signer.SignCertificateSigningRequest(callContext(t), bad)
	wantStatus(t, err, codes.InvalidArgument, "MALFORMED_REQUEST")

	byUID, err := ledgerAPI.FindRecords(callContext(t), &signetv1.FindRecordsRequest{ObjectUid: "uid-find"})
	if err != nil {
		t.Fatal(err)
	}
	if r := byUID.GetRecords(); len(r) != 1 || r[0].GetDecision() != "issued" || r[0].GetSerialNumber() != signed.GetSerialNumber() ||
		r[0].GetCertificateChainPem() != signed.GetCertificateChainPem() || r[0].GetHash() == "" {
		t.Fatalf("records of uid-find: %v", r)
	}
	bySerial, err := ledgerAPI.FindRecords(callContext(t), &signetv1.FindRecordsRequest{SerialNumber: "0x" + signed.GetSerialNumber()})
	if err != nil || len(bySerial.GetRecords()) != 1 || bySerial.GetRecords()[0].GetObjectUid() != "uid-find" {
		t.Fatalf("records of serial %s: %v, %v", signed.GetSerialNumber(), bySerial.GetRecords(), err)
	}
	refused, err := ledgerAPI.FindRecords(callContext(t), &signetv1.FindRecordsRequest{ObjectUid: "uid-find-bad"})
	if err != nil || len(refused.GetRecords()) != 1 || refused.GetRecords()[0].GetReason() != "MALFORMED_REQUEST" {
		t.Fatalf("records of the refused request: %v, %v", refused.GetRecords(), err)
	}
	_, err = ledgerAPI.FindRecords(callContext(t), &signetv1.FindRecordsRequest{ObjectUid: "a", SerialNumber: "01"})
	wantStatus(t, err, codes.InvalidArgument, "MALFORMED_REQUEST")

	// Another client sees nothing of the first one's calls.
	other := signetv1.NewLedgerServiceClient(s.dial(t, s.clientTLS(t, otherClient(t, dir))))
	if got, err := other.FindRecords(callContext(t), &signetv1.FindRecordsRequest{ObjectUid: "uid-find"}); err != nil || len(got.GetRecords()) != 0 {
		t.Fatalf("another client found %v, %v; want nothing", got.GetRecords(), err)
	}

	info, err := signer.GetServerInfo(callContext(t), &signetv1.GetServerInfoRequest{})
	if err != nil || info.GetVersion() != server.Version || info.GetCommit() != server.Commit || info.GetGoVersion() != runtime.Version() {
		t.Fatalf("GetServerInfo = %v, %v", info, err)
	}
}

// TestFindRecordsAdmin: a client with the admin role for a signer sees every record of it.
func TestFindRecordsAdmin(t *testing.T) {
	t.Parallel()
	cfg, dir := devConfig(t)
	cfg.Clients = append(cfg.Clients, access.Client{Identity: otherIdentity, Signers: []string{devpki.DefaultSigner}, Admin: true})
	s, _ := runServer(t, cfg, dir)
	signer := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{DNSNames: []string{"svc.example"}})
	if _, err := signer.SignCertificateSigningRequest(callContext(t), signRequest(csr, "uid-admin")); err != nil {
		t.Fatal(err)
	}
	admin := signetv1.NewLedgerServiceClient(s.dial(t, s.clientTLS(t, otherClient(t, dir))))
	got, err := admin.FindRecords(callContext(t), &signetv1.FindRecordsRequest{ObjectUid: "uid-admin"})
	if err != nil || len(got.GetRecords()) != 1 {
		t.Fatalf("the signer's admin found %v, %v; want the record", got.GetRecords(), err)
	}
}

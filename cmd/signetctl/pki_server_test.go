package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/atomicfile"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/internal/tlspki"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/servertest"
	"github.com/signet-pki/signet/signerclient"
)

// mountSecret writes the data of the Secret manifest into dir as the kubelet mounts it for
// the watcher (ca.crt, tls.crt, tls.key: deploy/watcher/config.yaml's server files) and
// returns the three paths.
func mountSecret(t *testing.T, manifest []byte, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	s := decodeSecret(t, manifest)
	for key, data := range s.Data {
		if err := atomicfile.Write(filepath.Join(dir, key), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
}

// mountedTLS is the watcher's view of the mounted Secret in dir as a crypto/tls client
// configuration for serverName.
func mountedTLS(t *testing.T, dir, serverName string) *tls.Config {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(certFile(t, filepath.Join(dir, "ca.crt")))
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: serverName}
}

// TestPKIHandshake: the Secret's files complete a mutual TLS handshake with a listener set up
// as signet-server sets up its own (TLS 1.3, client certificates required from
// clients-ca.crt, then the identity checked by access.Authorizer) under every server name; the
// server's certificate cannot pose as a client nor the watcher's as the server.
func TestPKIHandshake(t *testing.T) {
	t.Parallel()
	dir, manifest, _ := pkiInit(t, "--server-name", "signet.internal.example.com,localhost", "--server-ip", "127.0.0.1", "--watcher-identity", testIdentity)
	mount := t.TempDir()
	mountSecret(t, []byte(manifest), mount)
	authz, err := access.NewAuthorizer([]access.Client{{Identity: testIdentity, Signers: []string{"*"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(certName, keyName string) string {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certName), filepath.Join(dir, keyName))
		if err != nil {
			t.Fatal(err)
		}
		clientCAs := x509.NewCertPool()
		clientCAs.AddCert(certFile(t, filepath.Join(dir, tlspki.ClientCACert)))
		lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs, VerifyConnection: authz.VerifyConnection})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lis.Close() })
		go func() {
			for {
				conn, err := lis.Accept()
				if err != nil {
					return
				}
				go func() {
					defer conn.Close()
					if conn.(*tls.Conn).Handshake() == nil {
						_, _ = conn.Write([]byte("ok"))
					}
				}()
			}
		}()
		return lis.Addr().String()
	}
	// talk dials addr with cfg and reads the server's answer, which only comes after the
	// server accepted the client certificate (in TLS 1.3 the client finishes first).
	talk := func(addr string, cfg *tls.Config) error {
		conn, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 2)
		if _, err := io.ReadFull(conn, buf); err != nil {
			return err
		}
		return nil
	}
	addr := serve(tlspki.ServerCert, tlspki.ServerKey)
	for _, name := range []string{"signet.internal.example.com", "localhost", "127.0.0.1"} {
		if err := talk(addr, mountedTLS(t, mount, name)); err != nil {
			t.Errorf("handshake as the watcher with server name %s: %v", name, err)
		}
	}
	if err := talk(addr, mountedTLS(t, mount, "other.example.com")); err == nil {
		t.Error("the server certificate is accepted for a name it does not hold")
	}
	impostor := mountedTLS(t, mount, "localhost")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, tlspki.ServerCert), filepath.Join(dir, tlspki.ServerKey))
	if err != nil {
		t.Fatal(err)
	}
	impostor.Certificates = []tls.Certificate{pair}
	if err := talk(addr, impostor); err == nil {
		t.Error("the server's certificate is accepted as a client certificate")
	}
	if err := talk(serve(tlspki.WatcherCert, tlspki.WatcherKey), mountedTLS(t, mount, "localhost")); err == nil {
		t.Error("the watcher's certificate is accepted as the server's")
	}
}

// watcherClientSigner is the signer of docs/operations.md ("Renewing the watcher's client
// certificate through Signet"): the client CA as a signer that issues exactly the watcher's
// identity, for client auth only. Its verbs are the PKI folder and the identity.
const watcherClientSigner = `  - name: signet.dev/watcher-client
    key: %[1]s/clients-ca.key
    certificate: %[1]s/clients-ca.crt
    maxLifetime: 2160h
    profile:
      name: custom
      custom:
        subject: {commonNames: ["signet-watcher"]}
        sans: {uri: ["%[2]s"], required: true}
        usages: {allowed: [digital signature, key encipherment, client auth], required: [client auth]}
`

// startPKIServer runs a real signet-server whose TLS files are those of the PKI in dir, whose
// only client is the watcher, and whose only signer is watcherClientSigner.
func startPKIServer(t *testing.T, dir string) *servertest.Running {
	t.Helper()
	cfgDir := t.TempDir()
	cfg := fmt.Sprintf(`apiVersion: signet.dev/v1alpha1
kind: ServerConfiguration
tls:
  certFile: %[1]s/server.crt
  keyFile: %[1]s/server.key
  clientCAFile: %[1]s/clients-ca.crt
clients:
  - identity: %[2]s
    signers: ["*"]
ledger:
  dir: ledger
signers:
`, dir, testIdentity) + fmt.Sprintf(watcherClientSigner, dir, testIdentity)
	path := filepath.Join(cfgDir, "server.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := config.Load(path)
	if err != nil {
		t.Fatalf("the server config with the PKI's files: %v", err)
	}
	loaded.HTTP.Address = "127.0.0.1:0"
	return servertest.Start(t, loaded, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// watcherClient is the watcher's signing client (signerclient, as signet-watcher builds it)
// with the files mounted in dir, pacing its file checks with clk (nil: the real clock).
func watcherClient(t *testing.T, addr, dir string, clk clock.PassiveClock) *signerclient.Client {
	t.Helper()
	c, err := signerclient.New(signerclient.Config{Address: addr, CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "tls.crt"),
		KeyFile: filepath.Join(dir, "tls.key"), RPCTimeout: 20 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// serverSerial is the serial of the certificate the server at addr presents now.
func serverSerial(t *testing.T, addr, mount string) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, mountedTLS(t, mount, "127.0.0.1"))
	if err != nil {
		t.Fatalf("dialing the server: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// watcherCSR is a CertificateSigningRequest for the watcher-client signer: a new key's
// request for common name signet-watcher and the URI SAN identity, with usages.
func watcherCSR(t *testing.T, identity string, usages ...certificatesv1.KeyUsage) (*certificatesv1.CertificateSigningRequest, []byte) {
	t.Helper()
	key := testpki.Key(t, testpki.P256)
	u, err := url.Parse(identity)
	if err != nil {
		t.Fatal(err)
	}
	lifetime := int32(90 * 24 * 3600)
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "signet-watcher-renewal", UID: types.UID(fmt.Sprintf("%x", sha256.Sum256([]byte(identity+fmt.Sprint(usages)))))},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName:        "signet.dev/watcher-client",
			Request:           testpki.CSR(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: tlspki.WatcherCommonName}, URIs: []*url.URL{u}}),
			Usages:            usages,
			ExpirationSeconds: &lifetime,
			Username:          "ops-admin",
		},
	}
	return csr, testpki.KeyPEM(t, key)
}

// TestPKIWithSignetServer runs the PKI with a real signet-server and the watcher's real
// signing client, and checks what docs/operations.md says about it:
//   - the server loads the files; the watcher's client, with the Secret's files mounted,
//     is accepted (mTLS and the configured identity);
//   - pki renew --server: the server presents the new certificate after its reload;
//   - pki renew --watcher: once the Secret's files change, the client's next handshakes
//     present the new certificate (ClientCertificate, checked as a handshake does), and the
//     server accepts it;
//   - renewing through Signet: the client CA as a signer with a custom profile issues the
//     watcher's identity for client auth, the server accepts that certificate, and the same
//     signer refuses another identity and server auth.
func TestPKIWithSignetServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, manifest, _ := pkiInit(t, "--server-name", "signet.internal.example.com", "--server-ip", "127.0.0.1", "--watcher-identity", testIdentity)
	srv := startPKIServer(t, dir)
	mount := t.TempDir()
	mountSecret(t, []byte(manifest), mount)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	client := watcherClient(t, srv.Addr, mount, clk)
	if err := client.CheckHealth(ctx); err != nil {
		t.Fatalf("the watcher with the Secret's files: %v", err)
	}

	// The server's certificate, renewed and reloaded.
	before := serverSerial(t, srv.Addr, mount)
	if code, _, errOut := runCmd("pki", "renew", "--dir", dir, "--server"); code != 0 {
		t.Fatalf("pki renew --server: exit %d: %s", code, errOut)
	}
	srv.Reload(ctx)
	renewed := certFile(t, filepath.Join(dir, tlspki.ServerCert)).SerialNumber
	if got := serverSerial(t, srv.Addr, mount); got.Cmp(renewed) != 0 || got.Cmp(before) == 0 {
		t.Errorf("after pki renew --server and a reload the server presents serial %x, want the new %x", got, renewed)
	}

	// The watcher's certificate, renewed through a new Secret.
	code, manifest, errOut := runCmd("pki", "renew", "--dir", dir, "--watcher")
	if code != 0 {
		t.Fatalf("pki renew --watcher: exit %d: %s", code, errOut)
	}
	old := client.ClientCertificate().SerialNumber
	mountSecret(t, []byte(manifest), mount)
	if got := client.ClientCertificate().SerialNumber; got.Cmp(old) != 0 {
		t.Errorf("the client read the files again before its 5s check interval")
	}
	clk.SetTime(clk.Now().Add(6 * time.Second))
	want := certFile(t, filepath.Join(dir, tlspki.WatcherCert)).SerialNumber
	if got := client.ClientCertificate().SerialNumber; got.Cmp(want) != 0 {
		t.Errorf("after the Secret changed the client presents serial %x, want the renewed %x", got, want)
	}
	if err := watcherClient(t, srv.Addr, mount, nil).CheckHealth(ctx); err != nil {
		t.Errorf("the renewed watcher certificate: %v", err)
	}

	// Renewal through Signet itself.
	csr, keyPEM := watcherCSR(t, testIdentity, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	issued, err := client.SignCSR(ctx, csr)
	if err != nil {
		t.Fatalf("signing the watcher's renewal CSR with the client CA signer: %v", err)
	}
	block, _ := pem.Decode(issued.Chain)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if access.Identity(leaf) != testIdentity || leaf.NotAfter.Sub(leaf.NotBefore) < 89*24*time.Hour {
		t.Errorf("issued identity %q, lifetime %s; want %q for 90 days", access.Identity(leaf), leaf.NotAfter.Sub(leaf.NotBefore), testIdentity)
	}
	if err := verifies(leaf, certFile(t, filepath.Join(dir, tlspki.ClientCACert)), x509.ExtKeyUsageClientAuth, ""); err != nil {
		t.Errorf("the certificate Signet issued: %v", err)
	}
	for name, data := range map[string][]byte{"tls.crt": issued.Chain, "tls.key": keyPEM} {
		if err := atomicfile.Write(filepath.Join(mount, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := watcherClient(t, srv.Addr, mount, nil).CheckHealth(ctx); err != nil {
		t.Errorf("the watcher certificate Signet issued: %v", err)
	}
	for what, csr := range map[string]*certificatesv1.CertificateSigningRequest{
		"another identity": first(watcherCSR(t, "spiffe://prod.example.com/ns/default/sa/intruder", certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)),
		"server auth":      first(watcherCSR(t, testIdentity, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth, certificatesv1.UsageServerAuth)),
	} {
		_, err := client.SignCSR(ctx, csr)
		if reason, msg, terminal := signerclient.Classify(err); !terminal || reason != "PolicyViolation" {
			t.Errorf("%s: reason %q (%s), terminal %v; want a PolicyViolation", what, reason, msg, terminal)
		} else if !strings.Contains(msg, "sans:") && !strings.Contains(msg, "usages") {
			t.Errorf("%s: message %q names no rule", what, msg)
		}
	}
}

// first is the first of two results.
func first[A, B any](a A, _ B) A { return a }

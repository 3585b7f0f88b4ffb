package signerclient_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/servertest"
	"github.com/signet-pki/signet/signerclient"
)

// devServer runs a signet-server on a dev PKI and returns its address and state folder.
func devServer(t *testing.T) (addr, dir string) {
	t.Helper()
	cfg, dir := servertest.DevConfig(t, devpki.Options{})
	return servertest.Start(t, cfg, slog.New(slog.DiscardHandler)).Addr, dir
}

// clientTemplate is a client authentication leaf named cn.
func clientTemplate(cn string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// writePair writes a certificate from ca (self-signed when ca is nil) made from tmpl, and its
// key, into a new folder, and returns the files and the certificate.
func writePair(t *testing.T, ca *testpki.Authority, tmpl *x509.Certificate) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key := testpki.Key(t, testpki.P256)
	if ca == nil {
		ca = &testpki.Authority{Cert: tmpl, Key: key}
	}
	cert = ca.Sign(t, tmpl, key.Public())
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	writeFile(t, certFile, testpki.CertPEM(cert))
	writeFile(t, keyFile, testpki.KeyPEM(t, key))
	return certFile, keyFile, cert
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHandshakeFailuresNamed: against a real signet-server, each way the mutual TLS handshake
// fails is a distinct error (errors.Is), still an Unavailable status and transient for
// Classify, with a message that names the certificate and says what to do; the configured
// client gets through.
func TestHandshakeFailuresNamed(t *testing.T) {
	t.Parallel()
	addr, dir := devServer(t)
	ca := servertest.DevTLSCA(t, dir)
	caFile := filepath.Join(dir, devpki.TLSCACert)
	otherCAFile := filepath.Join(t.TempDir(), "other-ca.crt")
	writeFile(t, otherCAFile, testpki.CA(t).CertPEM())
	expired := clientTemplate("expired-client")
	expired.NotBefore, expired.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	early := clientTemplate("early-client")
	early.NotBefore, early.NotAfter = time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)
	serverOnly := clientTemplate("server-only")
	serverOnly.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	devCert, devKey := filepath.Join(dir, devpki.ClientCert), filepath.Join(dir, devpki.ClientKey)

	type pair struct {
		cert, key string
		leaf      *x509.Certificate
	}
	issue := func(ca *testpki.Authority, tmpl *x509.Certificate) pair {
		c, k, leaf := writePair(t, ca, tmpl)
		return pair{c, k, leaf}
	}
	tests := []struct {
		name       string
		client     pair
		caFile     string
		serverName string
		kind       error
		reason     string
		want       []string // in the message
	}{
		{"identity not configured", issue(ca, clientTemplate("stranger")), caFile, "", signerclient.ErrClientNotConfigured, "ClientNotConfigured",
			[]string{`refused client identity "stranger"`, "subject CN=stranger", "that identity is not among the server's clients", "add it to the server's clients"}},
		{"client CA untrusted", issue(testpki.CA(t), clientTemplate("foreign")), caFile, "", signerclient.ErrClientCAUntrusted, "ClientCAUntrusted",
			[]string{"does not trust the CA that issued this client certificate", `identity "foreign"`, "issuer CN=testpki CA",
				"the client certificate must be issued by a CA in the server's tls.clientCAFile"}},
		{"self-signed client", issue(nil, clientTemplate("self")), caFile, "", signerclient.ErrClientCAUntrusted, "ClientCAUntrusted",
			[]string{"does not trust the CA that issued this client certificate", "issuer CN=self"}},
		{"expired client", issue(ca, expired), caFile, "", signerclient.ErrClientCertificateExpired, "ClientCertificateExpired",
			[]string{`identity "expired-client"`, "as expired or not yet valid: it expired at " + expired.NotAfter.UTC().Format(time.RFC3339), "renew the client certificate"}},
		{"client not yet valid", issue(ca, early), caFile, "", signerclient.ErrClientCertificateExpired, "ClientCertificateExpired",
			[]string{"it is not valid before " + early.NotBefore.UTC().Format(time.RFC3339), "use a certificate valid now"}},
		{"client for server auth only", issue(ca, serverOnly), caFile, "", signerclient.ErrClientCertificateUsage, "ClientCertificateUsage",
			[]string{`identity "server-only"`, "its extended key usage (serverAuth) does not include client authentication", "extended key usage clientAuth"}},
		{"server CA untrusted", pair{devCert, devKey, nil}, otherCAFile, "", signerclient.ErrServerCAUntrusted, "ServerCAUntrusted",
			[]string{"the certificate of signing server " + addr, "is not issued by a CA in the client's server CA bundle"}},
		{"server name mismatch", pair{devCert, devKey, nil}, caFile, "wrong.example", signerclient.ErrServerNameMismatch, "ServerNameMismatch",
			[]string{`does not hold "wrong.example"`, "DNS:localhost", "IP:127.0.0.1", "set the client's server name to one of those"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := signerclient.New(signerclient.Config{Address: addr, CAFile: tt.caFile, CertFile: tt.client.cert, KeyFile: tt.client.key,
				ServerName: tt.serverName, RPCTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.CheckHealth(context.Background())
			if !errors.Is(err, tt.kind) {
				t.Fatalf("CheckHealth = %v, want %v", err, tt.kind)
			}
			umbrella := signerclient.ErrClientCertificateRejected
			if strings.HasPrefix(tt.reason, "Server") {
				umbrella = signerclient.ErrServerCertificateRejected
			}
			if !errors.Is(err, umbrella) {
				t.Errorf("error is not %v", umbrella)
			}
			for _, k := range []error{signerclient.ErrClientNotConfigured, signerclient.ErrClientCAUntrusted, signerclient.ErrClientCertificateExpired,
				signerclient.ErrClientCertificateUsage, signerclient.ErrServerCAUntrusted, signerclient.ErrServerNameMismatch} {
				if k != tt.kind && errors.Is(err, k) {
					t.Errorf("error is also %v", k)
				}
			}
			var he *signerclient.HandshakeError
			if !errors.As(err, &he) || he.Server != addr {
				t.Fatalf("error %v: no HandshakeError for server %s", err, addr)
			}
			if tt.client.leaf != nil && (he.Certificate == nil || !he.Certificate.Equal(tt.client.leaf)) {
				t.Errorf("HandshakeError.Certificate = %v, want the client's leaf", he.Certificate)
			}
			for _, w := range tt.want {
				if !strings.Contains(he.Error(), w) {
					t.Errorf("message %q lacks %q", he.Error(), w)
				}
			}
			if tt.kind != signerclient.ErrServerNameMismatch && strings.Contains(he.Error(), "server name") {
				t.Errorf("message %q speaks of the server name", he.Error())
			}
			if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), he.Error()) {
				t.Errorf("status = %v, want Unavailable with the handshake's message", st)
			}
			t.Logf("%s: %v", tt.reason, err)
			reason, message, terminal := signerclient.Classify(err)
			if reason != tt.reason || message != he.Error() || terminal {
				t.Errorf("Classify = %q, %q, %v; want %q, the handshake's message, transient", reason, message, terminal, tt.reason)
			}
		})
	}

	// The configured client gets through, and its identity is the server's reading of it.
	t.Run("configured client", func(t *testing.T) {
		t.Parallel()
		c, err := signerclient.New(signerclient.Config{Address: addr, CAFile: caFile, CertFile: devCert, KeyFile: devKey, RPCTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.CheckHealth(context.Background()); err != nil {
			t.Fatalf("CheckHealth = %v", err)
		}
		if id := access.Identity(c.ClientCertificate()); id != devpki.ClientName {
			t.Errorf("identity %q, want %q", id, devpki.ClientName)
		}
	})
}

// TestHandshakeFailureCured: the client keeps reconnecting after a refusal; once the client
// certificate on disk is replaced by one the server accepts, calls go through again, and the
// log has one error line for the failure and one line when it is over.
func TestHandshakeFailureCured(t *testing.T) {
	t.Parallel()
	addr, dir := devServer(t)
	certFile, keyFile, _ := writePair(t, servertest.DevTLSCA(t, dir), clientTemplate("stranger"))
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(4)))
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c, err := signerclient.New(signerclient.Config{Address: addr, CAFile: filepath.Join(dir, devpki.TLSCACert), CertFile: certFile, KeyFile: keyFile,
		RPCTimeout: 10 * time.Second, Clock: clk, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Two calls at least a reconnection apart: the same failure is logged once.
	for range 2 {
		if err := c.CheckHealth(context.Background()); !errors.Is(err, signerclient.ErrClientNotConfigured) {
			t.Fatalf("CheckHealth = %v, want ErrClientNotConfigured", err)
		}
		time.Sleep(1500 * time.Millisecond)
	}
	if n := strings.Count(logs(), "TLS handshake with the signing server failed"); n != 1 {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, logs())
	}
	for _, name := range []string{devpki.ClientCert, devpki.ClientKey} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, map[string]string{devpki.ClientCert: certFile, devpki.ClientKey: keyFile}[name], data)
	}
	clk.SetTime(clk.Now().Add(time.Minute)) // past the reload interval
	deadline := time.Now().Add(15 * time.Second)
	for err = c.CheckHealth(context.Background()); err != nil && time.Now().Before(deadline); err = c.CheckHealth(context.Background()) {
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("CheckHealth after the certificate was replaced = %v", err)
	}
	if !strings.Contains(logs(), "TLS handshake with the signing server succeeds again") {
		t.Errorf("the recovery was not logged:\n%s", logs())
	}
}

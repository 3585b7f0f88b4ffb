package signerclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/mtlstest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// serveTLS serves a fakeServer answering testChain on addr ("127.0.0.1:0": any free port)
// with the certificate cert, requiring a client certificate from clientCA. It returns the
// address it listens on and a function that stops the server.
func serveTLS(t *testing.T, addr string, cert tls.Certificate, clientCA *mtlstest.CA) (string, func()) {
	t.Helper()
	return serve(t, addr, clientCA.RequireClients(cert), &fakeServer{respond: func(context.Context) (*signetv1.SignCertificateSigningRequestResponse, error) {
		return &signetv1.SignCertificateSigningRequestResponse{CertificateChainPem: testChain}, nil
	}})
}

// rewrite replaces the content of path and moves its modification time forward, so that the
// change is seen even on a file system with coarse timestamps.
func rewrite(t *testing.T, path string, data []byte) {
	t.Helper()
	info, err := os.Stat(path)
	mtlstest.WriteFile(t, path, data)
	if err == nil {
		later := info.ModTime().Add(time.Minute)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
	}
}

// signUntil calls SignCSR until done accepts the error (nil on success), for up to 20s: gRPC
// reconnects with back-off, so a new connection may take a few seconds.
func signUntil(t *testing.T, c *Client, want string, done func(error) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := c.SignCSR(context.Background(), testCSR())
		if done(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SignCSR: %v; want %s", err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bufferedLogger logs through t and keeps a copy of the log, returned by the second value.
func bufferedLogger(t *testing.T) (klog.Logger, func() string) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	return logger, logger.GetSink().(ktesting.Underlier).GetBuffer().String
}

// reloadSetup is a Client with a fake clock and a buffered log, trusting the bundle in caFile,
// and the server it calls at addr.
type reloadSetup struct {
	c      *Client
	caFile string
	addr   string
	stop   func() // stops the server
	clk    *clocktesting.FakePassiveClock
	logs   func() string
}

// newReloadSetup starts a server with a certificate for localhost from ca and a Client
// trusting ca, and checks that a call succeeds.
func newReloadSetup(t *testing.T, ca *mtlstest.CA) *reloadSetup {
	t.Helper()
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
	addr, stop := serveTLS(t, "127.0.0.1:0", ca.Leaf(t, "localhost", x509.ExtKeyUsageServerAuth), ca)
	_, port, _ := net.SplitHostPort(addr)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	logger, logs := bufferedLogger(t)
	c := newTestClient(t, Config{
		Address: net.JoinHostPort("localhost", port), CAFile: caFile, CertFile: certFile, KeyFile: keyFile,
		RPCTimeout: 2 * time.Second, Clock: clk, Logger: logger,
	})
	if _, err := c.SignCSR(context.Background(), testCSR()); err != nil {
		t.Fatalf("SignCSR with the server on the trusted CA: %v", err)
	}
	return &reloadSetup{c: c, caFile: caFile, addr: addr, stop: stop, clk: clk, logs: logs}
}

// TestCABundleReload rolls the signing server onto a new CA as an operator would: the
// watcher trusts bundle A; the server restarts with a certificate from CA B and is refused;
// the bundle is rewritten with A and B; after the reload interval the watcher's new
// connections verify the server again, without a new Client.
func TestCABundleReload(t *testing.T) {
	caA, caB := mtlstest.NewCA(t), mtlstest.NewCA(t)
	s := newReloadSetup(t, caA)

	s.stop()
	serveTLS(t, s.addr, caB.Leaf(t, "localhost", x509.ExtKeyUsageServerAuth), caA)
	signUntil(t, s.c, "a refusal of the server on CA B", func(err error) bool {
		if err == nil {
			t.Fatal("SignCSR succeeded with the server on CA B while the bundle holds only A")
		}
		return errors.Is(err, ErrServerCAUntrusted)
	})

	rewrite(t, s.caFile, append(caA.CertPEM(), caB.CertPEM()...))
	s.clk.SetTime(s.clk.Now().Add(reloadInterval))
	signUntil(t, s.c, "success once the bundle holds A and B", func(err error) bool { return err == nil })
	if logs := s.logs(); !strings.Contains(logs, "Reloaded TLS files") || !strings.Contains(logs, s.caFile) {
		t.Errorf("log does not report the reload of %s:\n%s", s.caFile, logs)
	}
}

// TestCABundleBadRewriteKeepsPrevious: a CA bundle rewritten without a certificate keeps the
// previous one: a new connection to the server still verifies it, and the error is logged
// once, naming the file.
func TestCABundleBadRewriteKeepsPrevious(t *testing.T) {
	ca := mtlstest.NewCA(t)
	s := newReloadSetup(t, ca)

	rewrite(t, s.caFile, []byte("not PEM\n"))
	s.clk.SetTime(s.clk.Now().Add(reloadInterval))
	s.stop() // the next connection is a new handshake, after the reload check
	serveTLS(t, s.addr, ca.Leaf(t, "localhost", x509.ExtKeyUsageServerAuth), ca)
	signUntil(t, s.c, "success with the previous bundle", func(err error) bool { return err == nil })
	logs := s.logs()
	if n := strings.Count(logs, "Keeping the previous TLS files"); n != 1 || !strings.Contains(logs, "server CA "+s.caFile) {
		t.Errorf("log has %d errors about keeping the previous TLS files, want 1 naming %s:\n%s", n, s.caFile, logs)
	}
}

// TestCAReloaderCadence checks the CA bundle's reload rules directly: nothing changes before
// the reload interval; a valid rewrite is taken; an unreadable or empty bundle keeps the
// previous one and is logged once per change of the file, naming it.
func TestCAReloaderCadence(t *testing.T) {
	caA, caB := mtlstest.NewCA(t), mtlstest.NewCA(t)
	caFile, _, _ := caA.ClientFiles(t, t.TempDir(), "unused")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	logger, logs := bufferedLogger(t)
	r, err := newCAReloader(caFile, clk, logger)
	if err != nil {
		t.Fatalf("newCAReloader: %v", err)
	}
	leafA := caA.Leaf(t, "localhost", x509.ExtKeyUsageServerAuth).Leaf
	leafB := caB.Leaf(t, "localhost", x509.ExtKeyUsageServerAuth).Leaf
	check := func(step string, wantA, wantB bool) {
		t.Helper()
		roots := r.Get()
		for _, c := range []struct {
			name string
			leaf *x509.Certificate
			want bool
		}{{"A", leafA, wantA}, {"B", leafB, wantB}} {
			_, err := c.leaf.Verify(x509.VerifyOptions{Roots: roots})
			if got := err == nil; got != c.want {
				t.Errorf("%s: server certificate of CA %s trusted = %v, want %v", step, c.name, got, c.want)
			}
		}
	}
	errorsLogged := func() int { return strings.Count(logs(), "Keeping the previous TLS files") }
	tick := func() { clk.SetTime(clk.Now().Add(reloadInterval)) }

	check("initial bundle A", true, false)
	rewrite(t, caFile, caB.CertPEM())
	check("bundle B, before the reload interval", true, false)
	tick()
	check("bundle B, after the reload interval", false, true)

	rewrite(t, caFile, []byte("not PEM\n"))
	tick()
	check("bundle without certificates", false, true)
	tick()
	check("bundle without certificates, checked again", false, true)
	if n := errorsLogged(); n != 1 || !strings.Contains(logs(), "no CERTIFICATE block") {
		t.Errorf("%d errors logged for one bad rewrite, want 1 saying why:\n%s", n, logs())
	}
	if err := os.Remove(caFile); err != nil {
		t.Fatal(err)
	}
	tick()
	check("bundle removed", false, true)
	if n := errorsLogged(); n != 2 || !strings.Contains(logs(), "open "+caFile) {
		t.Errorf("%d errors logged after a second bad change, want 2, the last naming %s:\n%s", n, caFile, logs())
	}
	rewrite(t, caFile, bytes.Join([][]byte{caA.CertPEM(), caB.CertPEM()}, nil))
	tick()
	check("bundle A and B restored", true, true)
}

// TestServerVerificationStrict: with the CA bundle reloadable, the server is verified as
// strictly as before: a certificate from a foreign CA, for another name (from the address or
// from ServerName), or without the server-auth key usage is refused, each for its reason.
func TestServerVerificationStrict(t *testing.T) {
	ca, foreign := mtlstest.NewCA(t), mtlstest.NewCA(t)
	tests := []struct {
		name       string
		cert       tls.Certificate
		serverName string
		kind       error
		wantErr    string
	}{
		{"foreign CA", foreign.Leaf(t, "localhost", x509.ExtKeyUsageServerAuth), "", ErrServerCAUntrusted, "is not issued by a CA in the client's server CA bundle"},
		{"wrong name", ca.Leaf(t, "other.test", x509.ExtKeyUsageServerAuth), "", ErrServerNameMismatch, `does not hold "localhost"`},
		{"wrong ServerName", ca.Leaf(t, "localhost", x509.ExtKeyUsageServerAuth), "signet.test", ErrServerNameMismatch, `does not hold "signet.test"`},
		{"client-auth only", ca.Leaf(t, "localhost", x509.ExtKeyUsageClientAuth), "", ErrServerCertificateInvalid, "is not for server authentication"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, _ := serveTLS(t, "127.0.0.1:0", tt.cert, ca)
			_, port, _ := net.SplitHostPort(addr)
			caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
			c := newTestClient(t, Config{
				Address: net.JoinHostPort("localhost", port), ServerName: tt.serverName,
				CAFile: caFile, CertFile: certFile, KeyFile: keyFile, RPCTimeout: 2 * time.Second,
			})
			_, err := c.SignCSR(context.Background(), testCSR())
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("SignCSR error = %v, want %v containing %q", err, tt.kind, tt.wantErr)
			}
		})
	}
}

package signerclient

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2/ktesting"
)

var testNow = time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)

// testLeaf is a client leaf valid around testNow, changed by modify.
func testLeaf(modify ...func(*x509.Certificate)) *x509.Certificate {
	c := &x509.Certificate{Subject: pkix.Name{CommonName: "watcher-1"}, Issuer: pkix.Name{CommonName: "client CA"},
		SerialNumber: big.NewInt(0xabc), NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, m := range modify {
		m(c)
	}
	return c
}

// TestServerRefusal: each alert a server sends about the client certificate is named, with
// the client's leaf deciding between the kinds an alert may mean.
func TestServerRefusal(t *testing.T) {
	spiffe, _ := url.Parse("spiffe://cluster.example/ns/signet-system/sa/signet-watcher")
	tests := []struct {
		name  string
		alert tls.AlertError
		leaf  *x509.Certificate
		kind  error // nil: not a refusal
		want  string
	}{
		{"required, no certificate", 116, nil, ErrClientCertificateMissing, "requires a client certificate and none was presented"},
		{"required, certificate withheld", 116, testLeaf(), ErrClientCAUntrusted, "issuer CN=client CA"},
		{"unknown CA", 48, testLeaf(), ErrClientCAUntrusted, "must be issued by a CA in the server's tls.clientCAFile"},
		{"expired", 45, testLeaf(func(c *x509.Certificate) { c.NotAfter = testNow.Add(-time.Minute) }), ErrClientCertificateExpired,
			"it expired at 2027-06-01T11:59:00Z; renew the client certificate"},
		{"not yet valid", 45, testLeaf(func(c *x509.Certificate) { c.NotBefore = testNow.Add(time.Minute) }), ErrClientCertificateExpired,
			"it is not valid before 2027-06-01T12:01:00Z"},
		{"valid here", 45, testLeaf(), ErrClientCertificateExpired, "here it is valid from 2027-06-01T11:00:00Z to 2027-06-01T13:00:00Z, so the server's clock is off"},
		{"server auth only", 42, testLeaf(func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }),
			ErrClientCertificateUsage, "its extended key usage (serverAuth) does not include client authentication"},
		{"no extended key usage", 42, testLeaf(func(c *x509.Certificate) { c.ExtKeyUsage = nil }), ErrClientNotConfigured, `refused client identity "watcher-1"`},
		{"not configured", 42, testLeaf(), ErrClientNotConfigured, `refused client identity "watcher-1"`},
		{"URI identity", 42, testLeaf(func(c *x509.Certificate) { c.URIs = []*url.URL{spiffe} }), ErrClientNotConfigured,
			`refused client identity "spiffe://cluster.example/ns/signet-system/sa/signet-watcher"`},
		{"access denied", 49, testLeaf(), ErrClientNotConfigured, `with "access denied"`},
		{"revoked", 44, testLeaf(), ErrClientCertificateRejected, `with "revoked certificate"`},
		{"internal error", 80, testLeaf(), nil, ""},
	}
	for _, tt := range tests {
		err := fmt.Errorf("reading: %w", tt.alert)
		got := serverRefusal("192.0.2.1:8443", err, tt.leaf, testNow)
		if tt.kind == nil {
			if got != nil {
				t.Errorf("%s: %v, want no refusal", tt.name, got)
			}
			continue
		}
		if got == nil || !errors.Is(got, tt.kind) || !errors.Is(got, ErrClientCertificateRejected) || errors.Is(got, ErrServerCertificateRejected) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.kind)
			continue
		}
		if !strings.Contains(got.Error(), tt.want) || !strings.Contains(got.Error(), "192.0.2.1:8443") || strings.Contains(got.Error(), "server name") {
			t.Errorf("%s: message %q, want %q and the server", tt.name, got.Error(), tt.want)
		}
		if got.Alert != tt.alert || !errors.Is(got, err) {
			t.Errorf("%s: alert %d, unwraps to %v", tt.name, got.Alert, got.Unwrap())
		}
	}
}

// TestClientRefusal: the client's own refusal of the server's certificate is named; other
// handshake errors are not.
func TestClientRefusal(t *testing.T) {
	server := &x509.Certificate{Subject: pkix.Name{CommonName: "signet-server"}, Issuer: pkix.Name{CommonName: "TLS CA"},
		SerialNumber: big.NewInt(7), NotBefore: testNow.Add(-48 * time.Hour), NotAfter: testNow.Add(-time.Hour), DNSNames: []string{"signet.example"}}
	verification := func(err error) error {
		return &tls.CertificateVerificationError{UnverifiedCertificates: []*x509.Certificate{server}, Err: err}
	}
	tests := []struct {
		name string
		err  error
		kind error
		want string
	}{
		{"unknown authority", verification(x509.UnknownAuthorityError{Cert: server}), ErrServerCAUntrusted, "is not issued by a CA in the client's server CA bundle"},
		{"name", verification(x509.HostnameError{Certificate: server, Host: "10.0.0.5"}), ErrServerNameMismatch,
			`does not hold "10.0.0.5", the server name the client verifies (it holds DNS:signet.example)`},
		{"expired", verification(x509.CertificateInvalidError{Cert: server, Reason: x509.Expired}), ErrServerCertificateInvalid,
			"expired at 2027-06-01T11:00:00Z; renew the server's TLS certificate"},
		{"usage", verification(x509.CertificateInvalidError{Cert: server, Reason: x509.IncompatibleUsage}), ErrServerCertificateInvalid,
			"is not for server authentication"},
		{"other", verification(x509.CertificateInvalidError{Cert: server, Reason: x509.NotAuthorizedToSign}), ErrServerCertificateInvalid, "is not valid: x509:"},
		{"no certificate problem", io.EOF, nil, ""},
	}
	for _, tt := range tests {
		got := clientRefusal("192.0.2.1:8443", tt.err, testNow)
		if tt.kind == nil {
			if got != nil {
				t.Errorf("%s: %v, want nil", tt.name, got)
			}
			continue
		}
		if got == nil || !errors.Is(got, tt.kind) || !errors.Is(got, ErrServerCertificateRejected) || errors.Is(got, ErrClientCertificateRejected) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.kind)
			continue
		}
		if !strings.Contains(got.Error(), tt.want) {
			t.Errorf("%s: message %q lacks %q", tt.name, got.Error(), tt.want)
		}
		if (tt.kind == ErrServerNameMismatch) != strings.Contains(got.Error(), "server name") {
			t.Errorf("%s: message %q: the server name is the hint of a name mismatch only", tt.name, got.Error())
		}
		var cve *tls.CertificateVerificationError
		if !errors.As(got, &cve) || got.Certificate != server {
			t.Errorf("%s: the TLS error or the server's certificate is lost", tt.name)
		}
	}
}

// TestRemoteAlert: the alert crypto/tls reports as a *net.OpError "remote error" is read;
// a local alert or another error is not taken for the server's.
func TestRemoteAlert(t *testing.T) {
	if a, ok := remoteAlert(fmt.Errorf("x: %w", tls.AlertError(48))); !ok || a != 48 {
		t.Errorf("AlertError: %d, %v", a, ok)
	}
	for _, err := range []error{io.EOF, &net.OpError{Op: "local error", Err: errors.New("tls: bad certificate")},
		&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}} {
		if a, ok := remoteAlert(err); ok {
			t.Errorf("%v: alert %d", err, a)
		}
	}
}

// TestHandshakeFailuresLogOnce: a failure is logged as an error once per server while it
// repeats, again when it changes, and its end once; Explain attaches the failure a call's
// status names, also as gRPC quotes it.
func TestHandshakeFailuresLogOnce(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(4)))
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String
	creds := NewHandshakeCredentials(nil, HandshakeOptions{Logger: logger})
	f := creds.failures
	notConfigured := serverRefusal("192.0.2.1:8443", tls.AlertError(42), testLeaf(), testNow)
	expired := serverRefusal("192.0.2.1:8443", tls.AlertError(45), testLeaf(), testNow)
	for range 3 {
		f.failed(notConfigured)
	}
	f.failed(expired)
	f.succeeded("192.0.2.1:8443")
	f.succeeded("192.0.2.1:8443")
	out := logs()
	if n := strings.Count(out, "TLS handshake with the signing server failed"); n != 2 {
		t.Errorf("%d error lines, want 2 (one per distinct failure):\n%s", n, out)
	}
	if n := strings.Count(out, "still fails"); n != 2 {
		t.Errorf("%d repeat lines, want 2:\n%s", n, out)
	}
	if n := strings.Count(out, "succeeds again"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, out)
	}

	quoted := status.Error(codes.Unavailable, fmt.Sprintf("connection error: desc = %q", "transport: authentication handshake failed: "+notConfigured.Error()))
	err := creds.Explain(fmt.Errorf("calling: %w", quoted))
	if !errors.Is(err, ErrClientNotConfigured) || status.Code(err) != codes.Unavailable || !errors.Is(err, quoted) {
		t.Errorf("Explain(quoted) = %v, want ErrClientNotConfigured, still Unavailable", err)
	}
	if reason, msg, terminal := Classify(err); reason != "ClientNotConfigured" || msg != notConfigured.Error() || terminal {
		t.Errorf("Classify = %q, %q, %v", reason, msg, terminal)
	}
	for _, other := range []error{nil, status.Error(codes.Unavailable, "connection refused"), status.Error(codes.Internal, notConfigured.Error())} {
		if got := creds.Explain(other); got != other {
			t.Errorf("Explain(%v) = %v, want it unchanged", other, got)
		}
	}
}

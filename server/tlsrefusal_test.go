package server_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/servertest"
	"github.com/signet-pki/signet/server/webhook/webhooktest"
)

// clientPair is a certificate from ca for a new key, made from tmpl.
func clientPair(t *testing.T, ca *testpki.Authority, tmpl *x509.Certificate) tls.Certificate {
	t.Helper()
	key := testpki.Key(t, testpki.P256)
	cert := ca.Sign(t, tmpl, key.Public())
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
}

// clientTemplate is a client authentication leaf named cn.
func clientTemplate(cn string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// handshake connects to addr over TLS 1.3 presenting cert whatever CAs the server names (as
// signerclient does; nil presents none), then reads the server's first bytes: it returns the
// client's address and the read's error, the server's alert when it refused the client.
func (s *testServer) handshake(t *testing.T, addr string, cert *tls.Certificate) (local string, err error) {
	t.Helper()
	cfg := s.clientTLS(t)
	cfg.NextProtos = []string{"h2"}
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cert == nil {
			return &tls.Certificate{}, nil
		}
		return cert, nil
	}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	return conn.LocalAddr().String(), err
}

// logLine waits up to 5 s for the log line with message msg and attribute key = value, and
// returns its attributes; nil if none came.
func (b *logBuffer) logLine(msg, key, value string) map[string]any {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b.mu.Lock()
		lines := bytes.Split(b.buf.Bytes(), []byte("\n"))
		b.mu.Unlock()
		for _, l := range lines {
			var attrs map[string]any
			if json.Unmarshal(l, &attrs) == nil && attrs["msg"] == msg && attrs[key] == value {
				return attrs
			}
		}
	}
	return nil
}

// TestTLSClientRefusals: on both listeners (gRPC and the webhook) the server is exactly as
// strict as crypto/tls's RequireAndVerifyClientCert plus the client list: no certificate, a
// self-signed one, one from another CA, an expired one, one not yet valid, one for server
// authentication only and a valid one whose identity is not configured are all refused, each
// with the alert the client names, one WARN line "refused a TLS client" naming the reason, the
// remote address and the certificate (identity, subject, issuer, serial, NotAfter), and one
// count in signet_server_tls_client_refused_total{reason}; net/http logs no handshake error
// of its own. The configured client is accepted and its identity (read from the verified
// chain) authorized; on the webhook, over HTTP/2.
func TestTLSClientRefusals(t *testing.T) {
	t.Parallel()
	t.Run("grpc", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, nil)
		testTLSClientRefusals(t, s, s.addr)
		resp, err := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t)))).ListSigners(callContext(t), &signetv1.ListSignersRequest{})
		if err != nil || len(resp.GetSigners()) == 0 {
			t.Errorf("ListSigners as the configured client = %v, %v; want its signers", resp, err)
		}
	})
	t.Run("webhook", func(t *testing.T) {
		t.Parallel()
		w := startWebhook(t, nil)
		testTLSClientRefusals(t, w.testServer, w.srv.WebhookAddr())
		request, _ := servingCSR(t)
		resp, data := webhooktest.PostRaw(t, w.contractClient(t, w.devClient(t)), http.MethodPost, w.url, "application/json",
			bytes.NewReader(webhooktest.JSON(t, csrObject("uid-tls-refusals", request))))
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
			t.Errorf("the configured client got %s %d %s, want HTTP/2 200", resp.Proto, resp.StatusCode, data)
		}
		if recs := w.records(t)["uid-tls-refusals"]; len(recs) != 1 || recs[0].Client != devpki.ClientName {
			t.Errorf("ledger records %+v, want one issuance to %s", recs, devpki.ClientName)
		}
		if w.logs.Contains("TLS handshake error") {
			t.Error("net/http logged a handshake error of its own")
		}
	})
}

// testTLSClientRefusals presents every refused kind of client certificate to the listener of s
// on addr, checks each refusal's alert, log line and count, and that the configured client's
// handshake succeeds.
func testTLSClientRefusals(t *testing.T, s *testServer, addr string) {
	t.Helper()
	ca := servertest.DevTLSCA(t, s.dir)
	other := testpki.CA(t)
	selfKey := testpki.Key(t, testpki.P256)
	selfTmpl := clientTemplate("self-signed")
	selfSigned := (&testpki.Authority{Cert: selfTmpl, Key: selfKey}).Sign(t, selfTmpl, selfKey.Public())
	expired := clientTemplate("expired-client")
	expired.NotBefore, expired.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	early := clientTemplate("early-client")
	early.NotBefore, early.NotAfter = time.Now().Add(time.Hour), time.Now().Add(48*time.Hour)
	serverOnly := clientTemplate("server-only")
	serverOnly.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	pairs := map[string]tls.Certificate{
		"self-signed":    {Certificate: [][]byte{selfSigned.Raw}, PrivateKey: selfKey, Leaf: selfSigned},
		"foreign-client": clientPair(t, other, clientTemplate("foreign-client")),
		"expired-client": clientPair(t, ca, expired),
		"early-client":   clientPair(t, ca, early),
		"server-only":    clientPair(t, ca, serverOnly),
		"stranger":       clientPair(t, ca, clientTemplate("stranger")),
	}
	tests := []struct {
		cn, alert, reason string
	}{
		// The identity first: the refusals after it leave time for a second count, were
		// there one.
		{"stranger", "bad certificate", "identity_not_configured"},
		{"", "certificate required", "no_certificate"},
		{"self-signed", "unknown certificate authority", "unknown_ca"},
		{"foreign-client", "unknown certificate authority", "unknown_ca"},
		{"expired-client", "expired certificate", "expired"},
		{"early-client", "expired certificate", "not_yet_valid"},
		{"server-only", "bad certificate", "wrong_usage"},
	}
	for _, tt := range tests {
		var cert *tls.Certificate
		if tt.cn != "" {
			c := pairs[tt.cn]
			cert = &c
		}
		local, err := s.handshake(t, addr, cert)
		if err == nil || !strings.Contains(err.Error(), "remote error: tls: "+tt.alert) {
			t.Errorf("%s: the client read %v, want the alert %q", tt.reason, err, tt.alert)
		}
		line := s.logs.logLine("refused a TLS client", "remote_address", local)
		if line == nil {
			t.Errorf("%s: no log line for %s", tt.reason, local)
			continue
		}
		want := map[string]any{"level": "WARN", "reason": tt.reason}
		if cert != nil {
			leaf := cert.Leaf
			want["identity"] = tt.cn
			want["subject"] = leaf.Subject.String()
			want["issuer"] = leaf.Issuer.String()
			want["serial"] = hex.EncodeToString(leaf.SerialNumber.Bytes())
			want["not_after"] = leaf.NotAfter.UTC().Format(time.RFC3339)
		}
		for k, v := range want {
			if line[k] != v {
				t.Errorf("%s: log %s = %v, want %v (line %v)", tt.reason, k, line[k], v, line)
			}
		}
		if _, ok := line["error"]; !ok {
			t.Errorf("%s: log line without error: %v", tt.reason, line)
		}
		if _, ok := line["suppressed"]; ok {
			t.Errorf("%s: log line says some were suppressed: %v", tt.reason, line)
		}
	}

	// The configured client is accepted.
	if _, err := s.handshake(t, addr, ptr(s.devClient(t))); err != nil {
		t.Errorf("the configured client read %v, want the server's first bytes", err)
	}
	if n := s.logs.count("refused a TLS client"); n != len(tests) {
		t.Errorf("%d lines \"refused a TLS client\", want one for each of the %d refused clients", n, len(tests))
	}
	_, body := httpGet(t, s.srv.HTTPAddr(), "/metrics")
	for reason, n := range map[string]int{"no_certificate": 1, "unknown_ca": 2, "expired": 1, "not_yet_valid": 1,
		"wrong_usage": 1, "identity_not_configured": 1, "invalid": 0} {
		if want := fmt.Sprintf("signet_server_tls_client_refused_total{reason=%q} %d\n", reason, n); !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// count is the number of log lines with message msg.
func (b *logBuffer) count(msg string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		var attrs map[string]any
		if json.Unmarshal(l, &attrs) == nil && attrs["msg"] == msg {
			n++
		}
	}
	return n
}

func ptr[T any](v T) *T { return &v }

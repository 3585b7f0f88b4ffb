package server

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/metrics"
)

// TestRefusalLogRate: a flood of refused handshakes logs at most refusalLogBurst lines at
// once, then refusalLogPerSecond a second; the next line logged says how many were left out;
// the counter counts every refusal.
func TestRefusalLogRate(t *testing.T) {
	var out bytes.Buffer
	m := metrics.New("test", "", nil)
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRefusalLog(slog.New(slog.NewTextHandler(&out, nil)), m, func() time.Time { return now })
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "flood"}, Issuer: pkix.Name{CommonName: "some CA"},
		SerialNumber: big.NewInt(0x1f), NotAfter: now.Add(time.Hour)}
	remote := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 40000}
	const flood = 25
	for range flood {
		r.refused(remote, metrics.TLSRefusedUnknownCA, leaf, errors.New("x509: certificate signed by unknown authority"))
	}
	if got := strings.Count(out.String(), "refused a TLS client"); got != refusalLogBurst {
		t.Fatalf("%d refusals at once logged %d lines, want %d:\n%s", flood, got, refusalLogBurst, out.String())
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	for _, want := range []string{"level=WARN", "remote_address=192.0.2.7:40000", "reason=unknown_ca", "identity=flood",
		`subject="CN=flood"`, `issuer="CN=some CA"`, "serial=1f", "not_after=2027-01-01T01:00:00Z", "error="} {
		if !strings.Contains(first, want) {
			t.Errorf("line %q lacks %s", first, want)
		}
	}
	if strings.Contains(out.String(), "suppressed") {
		t.Errorf("the first lines say some were suppressed:\n%s", out.String())
	}

	out.Reset()
	now = now.Add(time.Second)
	r.refused(remote, metrics.TLSRefusedExpired, leaf, errors.New("x509: certificate has expired"))
	if line := out.String(); !strings.Contains(line, "reason=expired") || !strings.Contains(line, "suppressed=15") {
		t.Errorf("the line after the flood = %q, want reason=expired and suppressed=15", line)
	}
	if got := counter(t, m, metrics.TLSRefusedUnknownCA); got != flood {
		t.Errorf("unknown_ca counted %v, want %d", got, flood)
	}
}

// TestHandshakeFailedIgnoresOthers: a handshake that failed for another reason than the
// client's certificate (the client hung up, spoke no TLS) is neither counted nor logged
// above debug; one VerifyConnection reported already is not reported twice.
func TestHandshakeFailedIgnoresOthers(t *testing.T) {
	var out bytes.Buffer
	m := metrics.New("test", "", nil)
	r := newRefusalLog(slog.New(slog.NewTextHandler(&out, nil)), m, time.Now)
	r.handshakeFailed(nil, io.EOF)
	r.handshakeFailed(nil, errors.New("remote error: tls: unknown certificate authority"))
	r.handshakeFailed(nil, reportedError{errors.New("verifying client: unknown client \"x\"")})
	if out.Len() != 0 {
		t.Errorf("logged %q", out.String())
	}
	for _, reason := range metrics.TLSRefusalReasons {
		if got := counter(t, m, reason); got != 0 {
			t.Errorf("%s counted %v, want 0", reason, got)
		}
	}
	r.handshakeFailed(nil, errors.New("tls: client didn't provide a certificate"))
	if got := counter(t, m, metrics.TLSRefusedNoCertificate); got != 1 || !strings.Contains(out.String(), "reason=no_certificate") {
		t.Errorf("no certificate: counted %v, logged %q", got, out.String())
	}
}

// counter is signet_server_tls_client_refused_total{reason}, read from m's registry.
func counter(t *testing.T, m *metrics.Metrics, reason string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "signet_server_tls_client_refused_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			if s.GetLabel()[0].GetValue() == reason {
				return s.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no signet_server_tls_client_refused_total{reason=%q}", reason)
	return 0
}

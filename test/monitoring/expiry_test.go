package monitoring

import (
	"context"
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/filereload"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/servertest"
	"github.com/signet-pki/signet/signerclient"
	watchermetrics "github.com/signet-pki/signet/watcher/metrics"
)

// TestServerTLSCertificateExpiry runs a dev signing server and checks that
// signet_server_tls_certificate_expiry_timestamp_seconds on its /metrics is the NotAfter of
// the certificate it serves, before and after the certificate files are replaced and reloaded.
func TestServerTLSCertificateExpiry(t *testing.T) {
	t.Parallel()
	cfg, dir := servertest.DevConfig(t, devpki.Options{})
	srv := servertest.Start(t, cfg, slog.New(slog.DiscardHandler))
	metricsURL := "http://" + srv.HTTPAddr() + "/metrics"
	const name = "signet_server_tls_certificate_expiry_timestamp_seconds"

	first := readCert(t, cfg.TLS.CertFile)
	if got := scrapeGauge(t, httpGet(t, metricsURL), name); got != first.NotAfter.Unix() {
		t.Errorf("%s = %d, want the served certificate's NotAfter %d", name, got, first.NotAfter.Unix())
	}

	notAfter := first.NotAfter.AddDate(0, 0, 45).Truncate(time.Second)
	ca := servertest.DevTLSCA(t, dir)
	key := testpki.Key(t, testpki.P256)
	cert := ca.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "signet-server"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore:   time.Now().Add(-time.Minute),
		NotAfter:    notAfter,
	}, key.Public())
	replacePair(t, cfg.TLS.CertFile, cfg.TLS.KeyFile, cert, key)
	srv.Reload(context.Background())
	if got := scrapeGauge(t, httpGet(t, metricsURL), name); got != notAfter.Unix() {
		t.Errorf("%s after a reload = %d, want the new certificate's NotAfter %d", name, got, notAfter.Unix())
	}
}

// TestWatcherClientCertificateExpiry wires signerclient's ClientCertificate into the watcher's
// metrics as the watcher does and checks
// signet_watcher_client_certificate_expiry_timestamp_seconds before and after the client
// certificate file is renewed. No server is needed: the client dials lazily.
func TestWatcherClientCertificateExpiry(t *testing.T) {
	t.Parallel()
	_, dir := servertest.DevConfig(t, devpki.Options{})
	certFile, keyFile := filepath.Join(dir, devpki.ClientCert), filepath.Join(dir, devpki.ClientKey)
	clk := testingclock.NewFakeClock(time.Now())
	client, err := signerclient.New(signerclient.Config{
		Address:    "127.0.0.1:1",
		CAFile:     filepath.Join(dir, devpki.TLSCACert),
		CertFile:   certFile,
		KeyFile:    keyFile,
		RPCTimeout: time.Second,
		Clock:      clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	m := watchermetrics.New([]string{devpki.DefaultSigner}, nil, nil, nil)
	m.WatchClientCertificate(client.ClientCertificate)
	const name = "signet_watcher_client_certificate_expiry_timestamp_seconds"
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}

	first := readCert(t, certFile)
	if got := scrapeGauge(t, scrape(), name); got != first.NotAfter.Unix() {
		t.Errorf("%s = %d, want the client certificate's NotAfter %d", name, got, first.NotAfter.Unix())
	}

	notAfter := time.Now().AddDate(0, 0, 90).Truncate(time.Second)
	key := testpki.Key(t, testpki.P256)
	cert := servertest.DevTLSCA(t, dir).Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: devpki.ClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore:   time.Now().Add(-time.Minute),
		NotAfter:    notAfter,
	}, key.Public())
	replacePair(t, certFile, keyFile, cert, key)
	// The files are checked at most every few seconds, as for a handshake.
	clk.Step(time.Minute)
	if got := scrapeGauge(t, scrape(), name); got != notAfter.Unix() {
		t.Errorf("%s after renewal = %d, want the renewed certificate's NotAfter %d", name, got, notAfter.Unix())
	}
}

// readCert returns the first certificate of a PEM file.
func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := filereload.ParseCertificates(data)
	if err != nil || len(certs) == 0 {
		t.Fatalf("reading %s: %v (%d certificates)", path, err, len(certs))
	}
	return certs[0]
}

// replacePair replaces a key and its certificate file, key first, each by an atomic rename.
func replacePair(t *testing.T, certFile, keyFile string, cert *x509.Certificate, key crypto.Signer) {
	t.Helper()
	replaceFile(t, keyFile, testpki.KeyPEM(t, key))
	replaceFile(t, certFile, testpki.CertPEM(cert))
}

func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(body)
}

// scrapeGauge returns the value of the one unlabelled gauge name in a text exposition, as
// whole seconds; it fails the test when the gauge is missing.
func scrapeGauge(t *testing.T, exposition, name string) int64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(exposition))
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	mf, ok := families[name]
	if !ok || len(mf.GetMetric()) != 1 {
		t.Fatalf("the exposition has no single series %s", name)
	}
	v := mf.GetMetric()[0].GetGauge().GetValue()
	if v != float64(int64(v)) {
		t.Fatalf("%s = %v, want whole seconds", name, v)
	}
	return int64(v)
}

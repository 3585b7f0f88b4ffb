package metrics

import (
	"crypto/x509"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const clientExpiry = "signet_watcher_client_certificate_expiry_timestamp_seconds"

func newTLSTest() *Metrics {
	return New([]string{"example.com/a"}, []string{"signed"}, []string{"signed"}, []string{"Forbidden"})
}

// expirySample returns the exposition line of the client certificate expiry, "" without one.
func expirySample(t *testing.T, m *Metrics) string {
	t.Helper()
	for l := range strings.SplitSeq(scrape(t, m), "\n") {
		if strings.HasPrefix(l, clientExpiry+" ") {
			return l
		}
	}
	return ""
}

func expiryLine(notAfter time.Time) string {
	return fmt.Sprintf("%s %g", clientExpiry, float64(notAfter.Unix()))
}

func TestClientCertificateExpiry(t *testing.T) {
	m := newTLSTest()
	if got := expirySample(t, m); got != "" {
		t.Fatalf("before WatchClientCertificate: %q, want no sample", got)
	}
	first := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	second := first.AddDate(0, 0, 90)
	var cur atomic.Pointer[x509.Certificate]
	cur.Store(&x509.Certificate{NotAfter: first})
	m.WatchClientCertificate(cur.Load)
	checkLines(t, scrape(t, m),
		"# TYPE "+clientExpiry+" gauge",
		expiryLine(first))

	// The certificate file is renewed: the next scrape shows the new one.
	cur.Store(&x509.Certificate{NotAfter: second})
	if got, want := expirySample(t, m), expiryLine(second); got != want {
		t.Errorf("after a renewal: %q, want %q", got, want)
	}

	cur.Store(nil)
	if got := expirySample(t, m); got != "" {
		t.Errorf("without a certificate: %q, want no sample", got)
	}

	// A second call replaces the source instead of panicking on a duplicate registration.
	third := second.AddDate(0, 0, 90)
	m.WatchClientCertificate(func() *x509.Certificate { return &x509.Certificate{NotAfter: third} })
	if got, want := expirySample(t, m), expiryLine(third); got != want {
		t.Errorf("after a second WatchClientCertificate: %q, want %q", got, want)
	}
}

// TestClientCertificateExpiryConcurrent scrapes while the source is replaced (run with -race).
func TestClientCertificateExpiryConcurrent(t *testing.T) {
	m := newTLSTest()
	cert := &x509.Certificate{NotAfter: time.Now()}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				m.WatchClientCertificate(func() *x509.Certificate { return cert })
				if _, err := m.registry.Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestNilMetricsWatchClientCertificate: a nil *Metrics watches nothing and never reads the
// source; a new one given the same source shows its certificate's expiry.
func TestNilMetricsWatchClientCertificate(t *testing.T) {
	notAfter := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	var reads atomic.Int32
	checkNilRecordsNothing(t, "WatchClientCertificate", func(m *Metrics) {
		m.WatchClientCertificate(func() *x509.Certificate {
			if m == nil {
				reads.Add(1)
			}
			return &x509.Certificate{NotAfter: notAfter}
		})
	})
	if n := reads.Load(); n != 0 {
		t.Errorf("the source was read %d times through a nil *Metrics", n)
	}
}

package metrics

import (
	"crypto/x509"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const tlsExpiry = "signet_server_tls_certificate_expiry_timestamp_seconds"

func TestTLSCertificateExpiry(t *testing.T) {
	m := newTest(t)
	if got := gather(t, m.Registry(), tlsExpiry); len(got) != 0 {
		t.Fatalf("%s before WatchTLSCertificate = %v, want no series", tlsExpiry, got)
	}
	first := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	second := first.AddDate(0, 3, 0)
	var cur atomic.Pointer[x509.Certificate]
	cur.Store(&x509.Certificate{NotAfter: first})
	m.WatchTLSCertificate(cur.Load)
	if got := gather(t, m.Registry(), tlsExpiry); got[""] != float64(first.Unix()) || len(got) != 1 {
		t.Errorf("%s = %v, want %d", tlsExpiry, got, first.Unix())
	}

	// A reload swaps the certificate in use: the next scrape shows it.
	cur.Store(&x509.Certificate{NotAfter: second})
	if got := gather(t, m.Registry(), tlsExpiry); got[""] != float64(second.Unix()) {
		t.Errorf("%s after a reload = %v, want %d", tlsExpiry, got, second.Unix())
	}

	// No certificate, no sample.
	cur.Store(nil)
	if got := gather(t, m.Registry(), tlsExpiry); len(got) != 0 {
		t.Errorf("%s without a certificate = %v, want no series", tlsExpiry, got)
	}

	// A second call replaces the source instead of panicking on a duplicate registration.
	third := second.AddDate(1, 0, 0)
	m.WatchTLSCertificate(func() *x509.Certificate { return &x509.Certificate{NotAfter: third} })
	if got := gather(t, m.Registry(), tlsExpiry); got[""] != float64(third.Unix()) || len(got) != 1 {
		t.Errorf("%s after a second WatchTLSCertificate = %v, want %d", tlsExpiry, got, third.Unix())
	}
}

func TestTLSCertificateExpiryLint(t *testing.T) {
	m := newTest(t)
	m.WatchTLSCertificate(func() *x509.Certificate { return &x509.Certificate{NotAfter: time.Now()} })
	checkLint(t, m)
}

// TestTLSCertificateExpiryConcurrent scrapes while the source is replaced (run with -race).
func TestTLSCertificateExpiryConcurrent(t *testing.T) {
	m := newTest(t)
	cert := &x509.Certificate{NotAfter: time.Now()}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				m.WatchTLSCertificate(func() *x509.Certificate { return cert })
				if _, err := m.Registry().Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestNilMetricsWatchTLSCertificate: a nil *Metrics watches nothing and never reads the
// source; a new one given the same source shows its certificate's expiry.
func TestNilMetricsWatchTLSCertificate(t *testing.T) {
	notAfter := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	var reads atomic.Int32
	checkNilRecordsNothing(t, "WatchTLSCertificate", func(m *Metrics) {
		m.WatchTLSCertificate(func() *x509.Certificate {
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

// TestTLSClientRefused: every reason has a series from the start, at zero; a value outside
// TLSRefusalReasons counts as invalid, so the label stays bounded.
func TestTLSClientRefused(t *testing.T) {
	const name = "signet_server_tls_client_refused_total"
	m := newTest(t)
	got := gather(t, m.Registry(), name)
	if len(got) != len(TLSRefusalReasons) {
		t.Fatalf("%s at start = %v, want a zero series per reason", name, got)
	}
	for _, r := range TLSRefusalReasons {
		if v, ok := got["reason="+r]; !ok || v != 0 {
			t.Errorf("%s{reason=%q} at start = %v, %v; want 0", name, r, v, ok)
		}
	}
	m.ObserveTLSClientRefused(TLSRefusedExpired)
	m.ObserveTLSClientRefused("made-up")
	got = gather(t, m.Registry(), name)
	if got["reason=expired"] != 1 || got["reason=invalid"] != 1 || len(got) != len(TLSRefusalReasons) {
		t.Errorf("%s = %v, want expired 1 and invalid 1 (the made-up reason)", name, got)
	}
	checkNilRecordsNothing(t, "ObserveTLSClientRefused", func(m *Metrics) { m.ObserveTLSClientRefused(TLSRefusedExpired) })
}

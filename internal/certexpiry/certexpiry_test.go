package certexpiry_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signet-pki/signet/internal/certexpiry"
)

// gauge gathers reg and returns the samples of name.
func gauge(t *testing.T, reg *prometheus.Registry, name string) []float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				out = append(out, m.GetGauge().GetValue())
			}
		}
	}
	return out
}

// TestWatch: the gauge follows what current returns at each scrape, exports nothing for a nil
// certificate, and a second Watch of the name replaces current instead of failing.
func TestWatch(t *testing.T) {
	reg := prometheus.NewRegistry()
	cert := &x509.Certificate{NotAfter: time.Unix(1800000000, 0)}
	certexpiry.Watch(reg, "test_expiry_seconds", "help", func() *x509.Certificate { return cert })
	if got := gauge(t, reg, "test_expiry_seconds"); len(got) != 1 || got[0] != 1800000000 {
		t.Fatalf("gauge = %v, want [1800000000]", got)
	}
	cert = &x509.Certificate{NotAfter: time.Unix(1900000000, 0)}
	if got := gauge(t, reg, "test_expiry_seconds"); len(got) != 1 || got[0] != 1900000000 {
		t.Fatalf("after a reload the gauge = %v, want [1900000000]", got)
	}
	certexpiry.Watch(reg, "test_expiry_seconds", "help", func() *x509.Certificate { return nil })
	if got := gauge(t, reg, "test_expiry_seconds"); len(got) != 0 {
		t.Fatalf("samples for no certificate: %v, want none", got)
	}
}

package metrics

import (
	"crypto/x509"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// tlsCertificate is signet_server_tls_certificate_expiry_timestamp_seconds, a gauge read at
// scrape time from the serving certificate in use, so that a reloaded certificate shows at the
// next scrape without a hook in the reload.
type tlsCertificate struct {
	desc *prometheus.Desc

	mu      sync.RWMutex
	current func() *x509.Certificate
}

func newTLSCertificate(current func() *x509.Certificate) *tlsCertificate {
	return &tlsCertificate{
		desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, "tls_certificate_expiry_timestamp_seconds"),
			"NotAfter of the TLS certificate the server presents (gRPC and webhook), in seconds since the Unix epoch; "+
				"read at every scrape, so a reloaded certificate shows at once.",
			nil, nil),
		current: current,
	}
}

// Describe implements prometheus.Collector.
func (c *tlsCertificate) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector: one sample, the current certificate's NotAfter;
// none while there is no certificate.
func (c *tlsCertificate) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	current := c.current
	c.mu.RUnlock()
	cert := current()
	if cert == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()))
}

// WatchTLSCertificate exports signet_server_tls_certificate_expiry_timestamp_seconds, the
// NotAfter of the leaf certificate current returns, calling current at every scrape: pass the
// TLS source's accessor of the generation in use, and every reload is reflected. current
// must be safe for concurrent use; a nil certificate exports no sample. A second call
// replaces the first's current.
func (m *Metrics) WatchTLSCertificate(current func() *x509.Certificate) {
	if m == nil || current == nil {
		return
	}
	c := newTLSCertificate(current)
	err := m.registry.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		existing := already.ExistingCollector.(*tlsCertificate)
		existing.mu.Lock()
		existing.current = current
		existing.mu.Unlock()
		return
	}
	if err != nil {
		// Only a name clash with another collector; the names are constants.
		panic(err)
	}
}

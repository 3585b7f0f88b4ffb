package metrics

import (
	"crypto/x509"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// clientCertificate is signet_watcher_client_certificate_expiry_timestamp_seconds, a gauge
// read at scrape time from the client certificate the watcher presents to the signing server,
// so that a renewed certificate shows at the next scrape without a hook in the reload.
type clientCertificate struct {
	desc *prometheus.Desc

	mu      sync.RWMutex
	current func() *x509.Certificate
}

func newClientCertificate(current func() *x509.Certificate) *clientCertificate {
	return &clientCertificate{
		desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, "client_certificate_expiry_timestamp_seconds"),
			"NotAfter of the client certificate the watcher presents to the signing server, in seconds since the Unix epoch; "+
				"read at every scrape from the certificate file as reloaded, so a renewed certificate shows at once.",
			nil, nil),
		current: current,
	}
}

// Describe implements prometheus.Collector.
func (c *clientCertificate) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector: one sample, the current certificate's NotAfter;
// none while there is no certificate.
func (c *clientCertificate) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	current := c.current
	c.mu.RUnlock()
	cert := current()
	if cert == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()))
}

// WatchClientCertificate exports signet_watcher_client_certificate_expiry_timestamp_seconds,
// the NotAfter of the leaf certificate current returns, calling current at every scrape: pass
// signerclient.Client.ClientCertificate, which reloads the files as a handshake does. current
// must be safe for concurrent use; a nil certificate exports no sample. A second call replaces
// the first's current.
func (m *Metrics) WatchClientCertificate(current func() *x509.Certificate) {
	if m == nil || current == nil {
		return
	}
	err := m.registry.Register(newClientCertificate(current))
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		existing := already.ExistingCollector.(*clientCertificate)
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

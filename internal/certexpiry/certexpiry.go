// Package certexpiry exports the NotAfter of a certificate that may be replaced at any time (a
// reloaded serving or client certificate) as a Prometheus gauge read at scrape time, so that a
// renewal shows at the next scrape without a hook in the reload. The server's TLS certificate
// and the watcher's client certificate use it.
package certexpiry

import (
	"crypto/x509"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// collector is one such gauge.
type collector struct {
	desc *prometheus.Desc

	mu      sync.RWMutex
	current func() *x509.Certificate
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector: one sample, the current certificate's NotAfter in
// seconds since the Unix epoch; none while there is no certificate.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	current := c.current
	c.mu.RUnlock()
	cert := current()
	if cert == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()))
}

// Watch registers in reg the gauge fqName (with help) of the NotAfter of the certificate
// current returns, calling current at every scrape. current must be safe for concurrent use; a
// nil certificate exports no sample. Watching the same name again replaces current.
func Watch(reg prometheus.Registerer, fqName, help string, current func() *x509.Certificate) {
	c := &collector{desc: prometheus.NewDesc(fqName, help, nil, nil), current: current}
	err := reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(*collector); ok {
			existing.mu.Lock()
			existing.current = current
			existing.mu.Unlock()
			return
		}
	}
	if err != nil {
		// Only a clash with another collector of that name; the names are constants.
		panic(err)
	}
}

package metrics

import (
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signet-pki/signet/internal/certexpiry"
)

// WatchTLSCertificate exports signet_server_tls_certificate_expiry_timestamp_seconds, the
// NotAfter of the leaf certificate current returns, calling current at every scrape: pass the
// TLS source's accessor of the generation in use, and every reload is reflected. current
// must be safe for concurrent use; a nil certificate exports no sample. A second call
// replaces the first's current.
func (m *Metrics) WatchTLSCertificate(current func() *x509.Certificate) {
	if m == nil || current == nil {
		return
	}
	certexpiry.Watch(m.registry, prometheus.BuildFQName(namespace, subsystem, "tls_certificate_expiry_timestamp_seconds"),
		"NotAfter of the TLS certificate the server presents (gRPC and webhook), in seconds since the Unix epoch; "+
			"read at every scrape, so a reloaded certificate shows at once.", current)
}

package metrics

import (
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signet-pki/signet/internal/certexpiry"
)

// WatchClientCertificate exports signet_watcher_client_certificate_expiry_timestamp_seconds,
// the NotAfter of the leaf certificate current returns, calling current at every scrape: pass
// signerclient.Client.ClientCertificate, which reloads the files as a handshake does. current
// must be safe for concurrent use; a nil certificate exports no sample. A second call replaces
// the first's current.
func (m *Metrics) WatchClientCertificate(current func() *x509.Certificate) {
	if m == nil || current == nil {
		return
	}
	certexpiry.Watch(m.registry, prometheus.BuildFQName(namespace, subsystem, "client_certificate_expiry_timestamp_seconds"),
		"NotAfter of the client certificate the watcher presents to the signing server, in seconds since the Unix epoch; "+
			"read at every scrape from the certificate file as reloaded, so a renewed certificate shows at once.", current)
}

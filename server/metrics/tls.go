package metrics

import (
	"crypto/x509"
	"slices"

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

// Reasons of signet_server_tls_client_refused_total: why a TLS handshake refused the client's
// certificate.
const (
	TLSRefusedNoCertificate         = "no_certificate"          // none presented
	TLSRefusedUnknownCA             = "unknown_ca"              // not issued by a client CA (self-signed, another CA)
	TLSRefusedExpired               = "expired"                 // the certificate (or a CA of its chain) expired
	TLSRefusedNotYetValid           = "not_yet_valid"           // before its NotBefore (or a CA's)
	TLSRefusedWrongUsage            = "wrong_usage"             // extended key usage without client authentication
	TLSRefusedInvalid               = "invalid"                 // any other chain verification failure
	TLSRefusedIdentityNotConfigured = "identity_not_configured" // a valid chain whose identity is not in clients
)

// TLSRefusalReasons lists every reason; each series exists from the start, at zero.
var TLSRefusalReasons = []string{TLSRefusedNoCertificate, TLSRefusedUnknownCA, TLSRefusedExpired, TLSRefusedNotYetValid,
	TLSRefusedWrongUsage, TLSRefusedInvalid, TLSRefusedIdentityNotConfigured}

// newTLSRefused is signet_server_tls_client_refused_total, every reason at zero.
func newTLSRefused() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "tls_client_refused_total",
		Help: "TLS handshakes refused because of the client's certificate, by reason (no_certificate, unknown_ca, expired, " +
			"not_yet_valid, wrong_usage, invalid, identity_not_configured), on the gRPC and webhook listeners.",
	}, []string{"reason"})
	for _, r := range TLSRefusalReasons {
		c.WithLabelValues(r)
	}
	return c
}

// ObserveTLSClientRefused counts one TLS handshake refused for reason (a TLSRefused*
// constant; any other value counts as TLSRefusedInvalid, so the label stays bounded).
func (m *Metrics) ObserveTLSClientRefused(reason string) {
	if m == nil {
		return
	}
	if !slices.Contains(TLSRefusalReasons, reason) {
		reason = TLSRefusedInvalid
	}
	m.tlsRefused.WithLabelValues(reason).Inc()
}

package metrics

import "github.com/prometheus/client_golang/prometheus"

// Method labels of signet_server_panics_total that are not gRPC methods.
const (
	PanicMethodWebhook = "webhook" // the signing webhook's handler
	PanicMethodHTTP    = "http"    // the /metrics, /livez and /readyz listener
	// PanicMethodAttestation is the TPM attestation endpoint's handler.
	PanicMethodAttestation = "attestation"
)

// newPanics registers signet_server_panics_total on reg. The HTTP handlers' series exist from
// the start, at zero; the gRPC methods' once AddPanicMethods names them.
func newPanics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "panics_total",
		Help: "Panics contained at a front door, by gRPC method (full name) or HTTP handler (webhook, http, attestation): " +
			"each was answered INTERNAL and logged at ERROR with its stack (once per site); the server kept running. " +
			"Any increase is a bug to report.",
	}, []string{"method"})
	reg.MustRegister(c)
	for _, m := range []string{PanicMethodWebhook, PanicMethodHTTP, PanicMethodAttestation} {
		c.WithLabelValues(m)
	}
	return c
}

// ObservePanic counts one panic contained at method's door: a gRPC method's full name, or
// PanicMethodWebhook or PanicMethodHTTP. A gRPC method name comes from the server's own
// registered services (grpc-go answers unknown methods itself), a bounded set.
func (m *Metrics) ObservePanic(method string) {
	if m == nil {
		return
	}
	m.panics.WithLabelValues(method).Inc()
}

// AddPanicMethods makes the panics_total series of methods exist, at zero: the gRPC methods,
// known once the services are registered.
func (m *Metrics) AddPanicMethods(methods []string) {
	if m == nil {
		return
	}
	for _, method := range methods {
		m.panics.WithLabelValues(method)
	}
}

package metrics

import "github.com/prometheus/client_golang/prometheus"

// attestationMetrics are the attestation endpoint's and the insecure signers' series.
type attestationMetrics struct {
	calls    *prometheus.CounterVec
	insecure *prometheus.GaugeVec
}

// The steps and results of signet_server_attestation_calls_total.
var (
	attestationSteps   = []string{"challenge", "activate"}
	attestationResults = []string{"ok", "refused", "malformed", "rate_limited", "error"}
)

// newAttestationMetrics registers signet_server_attestation_calls_total (every step and
// result at zero) and signet_server_signer_insecure on reg.
func newAttestationMetrics(reg prometheus.Registerer) attestationMetrics {
	a := attestationMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "attestation_calls_total",
			Help: "Calls of the TPM attestation endpoint, by step (challenge, activate) and result (ok, refused, malformed, rate_limited, error).",
		}, []string{"step", "result"}),
		insecure: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "signer_insecure",
			Help: "1 for each served signer that signs kubelet client certificates with no proof of the node's identity (profile kubelet-client-insecure).",
		}, []string{"signer"}),
	}
	reg.MustRegister(a.calls, a.insecure)
	for _, s := range attestationSteps {
		for _, r := range attestationResults {
			a.calls.WithLabelValues(s, r)
		}
	}
	return a
}

// ObserveAttestation counts one call of the attestation endpoint.
func (m *Metrics) ObserveAttestation(step, result string) {
	if m == nil {
		return
	}
	m.attestation.calls.WithLabelValues(step, result).Inc()
}

// SetInsecure marks a served signer as insecure (kubelet-client-insecure).
func (m *Metrics) SetInsecure(signer string) {
	if m == nil || m.signer(signer) == UnknownSigner {
		return
	}
	m.attestation.insecure.WithLabelValues(signer).Set(1)
}

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// keyMetrics are the metrics of the signers' CA keys: every signature by backend and outcome,
// its duration, and whether each signer's active key can sign now.
type keyMetrics struct {
	keyOps       *prometheus.CounterVec
	keyDuration  *prometheus.HistogramVec
	keyAvailable *prometheus.GaugeVec
}

func newKeyMetrics() keyMetrics {
	return keyMetrics{
		keyOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "key_operations_total",
			Help: "Signatures made with a CA key, by signer, backend (file, pkcs11, tpm) and outcome (ok, error, unavailable).",
		}, []string{"signer", "backend", "outcome"}),
		keyDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "key_operation_duration_seconds",
			Help:    "Time a CA key took to sign, by signer and backend.",
			Buckets: latencyBuckets,
		}, []string{"signer", "backend"}),
		keyAvailable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "key_available",
			Help: "1 when the signer's active CA key can sign, 0 while its HSM or TPM is unreachable and the key is being re-opened.",
		}, []string{"signer"}),
	}
}

func (k keyMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{k.keyOps, k.keyDuration, k.keyAvailable}
}

// ObserveKeyOperation counts one signature of signer's CA key on backend, with its outcome
// (keystore's Outcome constants) and duration.
func (m *Metrics) ObserveKeyOperation(signer, backend, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	s := m.signer(signer)
	m.keyOps.WithLabelValues(s, backend, outcome).Inc()
	m.keyDuration.WithLabelValues(s, backend).Observe(d.Seconds())
}

// SetKeyAvailable records whether signer's active CA key can sign now.
func (m *Metrics) SetKeyAvailable(signer string, available bool) {
	if m == nil || m.signer(signer) == UnknownSigner {
		return
	}
	v := 0.0
	if available {
		v = 1
	}
	m.keyAvailable.WithLabelValues(signer).Set(v)
}

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// WitnessMetrics records the ledger witness's metrics (watcher/witness). A nil *WitnessMetrics
// records nothing.
type WitnessMetrics struct {
	checks     *prometheus.CounterVec
	size       *prometheus.GaugeVec
	consistent prometheus.Gauge
}

func newWitnessMetrics() *WitnessMetrics {
	w := &WitnessMetrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_witness_checks_total",
			Help: "Checks of the signing server's ledger against the checkpoint the cluster witnessed, by result: ok, alarm (shrunk, forked or untrusted), error (could not check).",
		}, []string{"result"}),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_witness_size",
			Help: "Records covered by the latest checkpoint the cluster accepted, by log origin.",
		}, []string{"origin"}),
		consistent: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_witness_consistent",
			Help: "1 while the signing server's ledger extends the checkpoint the cluster witnessed, 0 while the witness's alarm is raised.",
		}),
	}
	w.consistent.Set(1)
	return w
}

func (w *WitnessMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.checks, w.size, w.consistent}
}

// Witness returns the recorder of the ledger witness's metrics; nil for a nil m.
func (m *Metrics) Witness() *WitnessMetrics {
	if m == nil {
		return nil
	}
	return m.witness
}

// InitResults exports signet_watcher_ledger_witness_checks_total at 0 for each result the
// witness records (witness.Results(), its one list), before the first check.
func (w *WitnessMetrics) InitResults(results []string) {
	if w == nil {
		return
	}
	for _, r := range results {
		w.checks.WithLabelValues(r)
	}
}

// ObserveCheck counts one check by result.
func (w *WitnessMetrics) ObserveCheck(result string) {
	if w != nil {
		w.checks.WithLabelValues(result).Inc()
	}
}

// SetWitnessed records the size of the latest accepted checkpoint of origin.
func (w *WitnessMetrics) SetWitnessed(origin string, size int64) {
	if w != nil {
		w.size.WithLabelValues(origin).Set(float64(size))
	}
}

// SetConsistent records whether the alarm is down.
func (w *WitnessMetrics) SetConsistent(ok bool) {
	if w == nil {
		return
	}
	v := 0.0
	if ok {
		v = 1
	}
	w.consistent.Set(v)
}

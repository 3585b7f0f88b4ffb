package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ledgerMetrics are the metrics of the ledger's signed checkpoints and its storage.
type ledgerMetrics struct {
	checkpointSize prometheus.Gauge
	checkpointLag  prometheus.Histogram
	ledgerState    *prometheus.GaugeVec
}

// Ledger states for signet_server_ledger_state.
const (
	LedgerOK              = "ok"
	LedgerUnavailable     = "unavailable"      // closed for appends, recovering by itself
	LedgerRestartRequired = "restart_required" // closed for appends until an operator acts
)

func newLedgerMetrics() *ledgerMetrics {
	return &ledgerMetrics{
		checkpointSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_checkpoint_size",
			Help: "Number of ledger records covered by the latest signed checkpoint.",
		}),
		checkpointLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_checkpoint_lag_seconds",
			Help:    "Time from a record's acknowledgement to the first signed checkpoint that covers it (the oldest record of each checkpoint).",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}),
		ledgerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_state",
			Help: "1 for the ledger's current state: ok, unavailable (closed for appends by a storage fault, recovering by itself) or restart_required (an operator must act).",
		}, []string{"state"}),
	}
}

func (l *ledgerMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.checkpointSize, l.checkpointLag, l.ledgerState}
}

// ObserveCheckpoint records a signed checkpoint of size records whose oldest newly covered
// record waited lag for it.
func (m *Metrics) ObserveCheckpoint(size int64, lag time.Duration) {
	if m == nil {
		return
	}
	m.checkpointSize.Set(float64(size))
	m.checkpointLag.Observe(lag.Seconds())
}

// ObserveCheckpointSize records the size of the latest signed checkpoint (at start, before
// any record waited for one).
func (m *Metrics) ObserveCheckpointSize(size int64) {
	if m != nil {
		m.checkpointSize.Set(float64(size))
	}
}

// SetLedgerState sets signet_server_ledger_state: 1 for state, 0 for the others.
func (m *Metrics) SetLedgerState(state string) {
	if m == nil {
		return
	}
	for _, s := range []string{LedgerOK, LedgerUnavailable, LedgerRestartRequired} {
		v := 0.0
		if s == state {
			v = 1
		}
		m.ledgerState.WithLabelValues(s).Set(v)
	}
}

package metrics

import "github.com/prometheus/client_golang/prometheus"

// newLedgerSpace returns signet_server_ledger_space_needed_bytes, registered on reg.
func newLedgerSpace(reg prometheus.Registerer) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "ledger_space_needed_bytes",
		Help: "Bytes that must be freed on the ledger's file system before the ledger accepts records again " +
			"(what its next records need, with the headroom it keeps, minus what is free); 0 while appends fit.",
	})
	reg.MustRegister(g)
	return g
}

// SetLedgerSpaceNeeded sets signet_server_ledger_space_needed_bytes: the bytes that must be
// freed on the ledger's file system before the next records fit (ledger.Ledger.SpaceNeeded),
// 0 while they fit. Negative values count as 0.
func (m *Metrics) SetLedgerSpaceNeeded(bytes int64) {
	if m == nil {
		return
	}
	m.ledgerSpace.Set(float64(max(bytes, 0)))
}

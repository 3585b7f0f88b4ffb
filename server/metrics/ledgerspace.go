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

// newLedgerGrowth returns the gauges of the ledger's size and of what its start read,
// registered on reg.
func newLedgerGrowth(reg prometheus.Registerer) ledgerGrowth {
	g := ledgerGrowth{
		readAtStart: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_records_read_at_start",
			Help: "Records the ledger read when the server started: the state records, the idempotency window, the tree's " +
				"right edge and those written after the last index write. It does not grow with the history (docs/ledger.md).",
		}),
		segments: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_segment",
			Help: "The number of the ledger segment being appended to (ledger-<n>.jsonl); the ones before it are closed.",
		}),
		unindexed: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_unindexed_records",
			Help: "Acknowledged ledger records not yet written to the index (it is written every second; a backlog that " +
				"keeps growing means the index cannot be written, and the next start reads those records).",
		}),
	}
	reg.MustRegister(g.readAtStart, g.segments, g.unindexed)
	return g
}

// ledgerGrowth are the gauges of newLedgerGrowth.
type ledgerGrowth struct {
	readAtStart, segments, unindexed prometheus.Gauge
}

// SetLedgerGrowth sets signet_server_ledger_records_read_at_start, the current segment's
// number and the unindexed backlog.
func (m *Metrics) SetLedgerGrowth(readAtStart uint64, segment uint32, unindexed int) {
	if m == nil {
		return
	}
	m.ledgerGrowth.readAtStart.Set(float64(readAtStart))
	m.ledgerGrowth.segments.Set(float64(segment))
	m.ledgerGrowth.unindexed.Set(float64(unindexed))
}

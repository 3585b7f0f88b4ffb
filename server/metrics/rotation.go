package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// rotationMetrics are the metrics of the signers' CA sets and their rotation: CAs by state,
// the bundle each cluster last reported, and every rotation step (forced ones apart).
type rotationMetrics struct {
	anchors      *prometheus.GaugeVec
	reported     *prometheus.GaugeVec
	reportedHash *prometheus.GaugeVec
	rotations    *prometheus.CounterVec
	forced       *prometheus.CounterVec
	hashMu       sync.Mutex
	lastHash     map[[2]string]string // (signer, cluster) → the hash its series carries
}

func newRotationMetrics() *rotationMetrics {
	return &rotationMetrics{
		anchors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ca_anchors",
			Help: "CAs of each signer by state: active (issues), staged (published, not issuing yet), retired (published while its leaves may be valid), removed.",
		}, []string{"signer", "state"}),
		reported: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_reported_timestamp_seconds",
			Help: "Unix time of the last report of each cluster's published trust bundle for a signer.",
		}, []string{"signer", "cluster"}),
		reportedHash: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_reported_info",
			Help: "1 for the hash (hex SHA-256) of the trust bundle each cluster last reported published for a signer.",
		}, []string{"signer", "cluster", "hash"}),
		rotations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ca_rotation_steps_total",
			Help: "CA rotation steps taken (stage, activate, retire), by signer.",
		}, []string{"signer", "step"}),
		forced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ca_rotation_forced_total",
			Help: "CA rotation steps forced past their gate (--force), by signer: each should have been reviewed.",
		}, []string{"signer", "step"}),
		lastHash: map[[2]string]string{},
	}
}

func (r *rotationMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.anchors, r.reported, r.reportedHash, r.rotations, r.forced}
}

// SetAnchors records how many of signer's CAs are in each state.
func (m *Metrics) SetAnchors(signer string, byState map[string]int) {
	if m == nil || m.signer(signer) == UnknownSigner {
		return
	}
	for state, n := range byState {
		m.anchors.WithLabelValues(signer, state).Set(float64(n))
	}
}

// ObserveReport records that cluster reported the bundle of hash for signer at when.
func (m *Metrics) ObserveReport(signer, cluster, hash string, when time.Time) {
	if m == nil || m.signer(signer) == UnknownSigner {
		return
	}
	m.reported.WithLabelValues(signer, cluster).Set(float64(when.Unix()))
	key := [2]string{signer, cluster}
	m.hashMu.Lock()
	defer m.hashMu.Unlock()
	if old, ok := m.lastHash[key]; ok && old != hash {
		m.reportedHash.DeleteLabelValues(signer, cluster, old)
	}
	m.lastHash[key] = hash
	m.reportedHash.WithLabelValues(signer, cluster, hash).Set(1)
}

// ObserveRotation counts a rotation step of signer, and apart when it was forced.
func (m *Metrics) ObserveRotation(signer, step string, forced bool) {
	if m == nil || m.signer(signer) == UnknownSigner {
		return
	}
	m.rotations.WithLabelValues(signer, step).Inc()
	if forced {
		m.forced.WithLabelValues(signer, step).Inc()
	}
}

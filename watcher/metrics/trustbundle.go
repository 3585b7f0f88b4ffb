package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TrustBundleMetrics records the ClusterTrustBundle publisher's metrics. A nil
// *TrustBundleMetrics records nothing.
type TrustBundleMetrics struct {
	published *prometheus.GaugeVec
	anchors   *prometheus.GaugeVec
	writes    *prometheus.CounterVec
	errors    *prometheus.CounterVec
}

// Operations of signet_watcher_trust_bundle_writes_total.
const (
	TrustBundleCreated = "created"
	TrustBundleUpdated = "updated"
)

// newTrustBundleMetrics creates the publisher's metrics with a publish-error series per
// signer and reason, and a write series per signer and operation, from the start (at 0). The
// published timestamp and anchor count have a series per signer only once this replica has
// published (or confirmed) that signer's bundle.
func newTrustBundleMetrics(signers, reasons []string) *TrustBundleMetrics {
	t := &TrustBundleMetrics{
		published: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_published_timestamp_seconds",
			Help: "Unix time at which this replica last wrote a signer's ClusterTrustBundle, or found it up to date, by signer.",
		}, []string{"signer"}),
		anchors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_anchors",
			Help: "Trust anchors (CA certificates) in a signer's ClusterTrustBundle as last published or confirmed, by signer.",
		}, []string{"signer"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_writes_total",
			Help: "ClusterTrustBundles created or updated (the content had changed or drifted), by signer and operation.",
		}, []string{"signer", "operation"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_publish_errors_total",
			Help: "Failed attempts to publish a signer's ClusterTrustBundle, by signer and reason (retried every period).",
		}, []string{"signer", "reason"}),
	}
	for _, signer := range signers {
		for _, op := range []string{TrustBundleCreated, TrustBundleUpdated} {
			t.writes.WithLabelValues(signer, op)
		}
		for _, reason := range reasons {
			t.errors.WithLabelValues(signer, reason)
		}
	}
	return t
}

// collectors returns the metrics to register.
func (t *TrustBundleMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.published, t.anchors, t.writes, t.errors}
}

// ObservePublished records that signer's bundle holds anchors certificates and was written
// or found up to date at when.
func (t *TrustBundleMetrics) ObservePublished(signer string, anchors int, when time.Time) {
	if t == nil {
		return
	}
	t.published.WithLabelValues(signer).Set(float64(when.UnixNano()) / 1e9)
	t.anchors.WithLabelValues(signer).Set(float64(anchors))
}

// ObserveWrite counts one write of signer's bundle: TrustBundleCreated or TrustBundleUpdated.
func (t *TrustBundleMetrics) ObserveWrite(signer, operation string) {
	if t == nil {
		return
	}
	t.writes.WithLabelValues(signer, operation).Inc()
}

// ObserveError counts one failed attempt to publish signer's bundle, for reason.
func (t *TrustBundleMetrics) ObserveError(signer, reason string) {
	if t == nil {
		return
	}
	t.errors.WithLabelValues(signer, reason).Inc()
}

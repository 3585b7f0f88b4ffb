package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TrustBundleMetrics records the ClusterTrustBundle publisher's metrics. A nil
// *TrustBundleMetrics records nothing.
type TrustBundleMetrics struct {
	published  *prometheus.GaugeVec
	anchors    *prometheus.GaugeVec
	info       *prometheus.GaugeVec
	writes     *prometheus.CounterVec
	errors     *prometheus.CounterVec
	errorTimes *prometheus.GaugeVec
	reports    *prometheus.CounterVec

	mu     sync.Mutex
	hashes map[string]string // signer → hash of its info series
}

// Operations of signet_watcher_trust_bundle_writes_total.
const (
	TrustBundleCreated = "created"
	TrustBundleUpdated = "updated"
)

// States of signet_watcher_trust_bundle_anchors: those of signerclient's anchors, and unknown
// for a certificate the server did not describe (a server older than the anchor states).
const (
	TrustBundleActive  = "active"
	TrustBundleStaged  = "staged"
	TrustBundleRetired = "retired"
	TrustBundleUnknown = "unknown"
)

// TrustBundleStates returns every state of signet_watcher_trust_bundle_anchors.
func TrustBundleStates() []string {
	return []string{TrustBundleActive, TrustBundleStaged, TrustBundleRetired, TrustBundleUnknown}
}

// Outcomes of signet_watcher_trust_bundle_reports_total.
const (
	// TrustBundleReported: the server took the report.
	TrustBundleReported = "reported"
	// TrustBundleReportRefused: the server refused it (unknown signer, client not allowed,
	// malformed, cluster not listed for the signer).
	TrustBundleReportRefused = "refused"
	// TrustBundleReportFailed: the server could not be asked or did not answer.
	TrustBundleReportFailed = "failed"
	// TrustBundleReportUnsupported: the server is too old to take reports.
	TrustBundleReportUnsupported = "unsupported"
)

// TrustBundleReportOutcomes returns every outcome of signet_watcher_trust_bundle_reports_total.
func TrustBundleReportOutcomes() []string {
	return []string{TrustBundleReported, TrustBundleReportRefused, TrustBundleReportFailed, TrustBundleReportUnsupported}
}

// newTrustBundleMetrics creates the publisher's metrics with a publish-error series per
// signer and reason, a write series per signer and operation, and a report series per signer
// and outcome, from the start (at 0). The published timestamp, anchor counts and bundle info
// have series for a signer only once this replica has published (or confirmed) that signer's
// bundle; the error timestamp only once an attempt failed for that reason.
func newTrustBundleMetrics(signers, reasons []string) *TrustBundleMetrics {
	t := &TrustBundleMetrics{
		published: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_published_timestamp_seconds",
			Help: "Unix time at which this replica last wrote a signer's ClusterTrustBundle, or found it up to date, by signer.",
		}, []string{"signer"}),
		anchors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_anchors",
			Help: "Trust anchors (CA certificates) in a signer's ClusterTrustBundle as last published or confirmed, " +
				"by signer and state on the signing server (active, staged, retired; unknown when the server did not say).",
		}, []string{"signer", "state"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_info",
			Help: "1 for the hex SHA-256 of a signer's ClusterTrustBundle trustBundle as last published or confirmed, " +
				"the hash reported to the signing server, by signer and hash.",
		}, []string{"signer", "hash"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_writes_total",
			Help: "ClusterTrustBundles created or updated (the content had changed or drifted), by signer and operation.",
		}, []string{"signer", "operation"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_publish_errors_total",
			Help: "Failed attempts to publish a signer's ClusterTrustBundle, by signer and reason (retried every period).",
		}, []string{"signer", "reason"}),
		errorTimes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_publish_error_timestamp_seconds",
			Help: "Unix time of this replica's last failed attempt to publish a signer's ClusterTrustBundle, by signer and reason.",
		}, []string{"signer", "reason"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "trust_bundle_reports_total",
			Help: "Reports of a published ClusterTrustBundle to the signing server (ReportTrustBundle), by signer and outcome " +
				"(reported, refused, failed, unsupported).",
		}, []string{"signer", "outcome"}),
		hashes: map[string]string{},
	}
	for _, signer := range signers {
		for _, op := range []string{TrustBundleCreated, TrustBundleUpdated} {
			t.writes.WithLabelValues(signer, op)
		}
		for _, reason := range reasons {
			t.errors.WithLabelValues(signer, reason)
		}
		for _, outcome := range TrustBundleReportOutcomes() {
			t.reports.WithLabelValues(signer, outcome)
		}
	}
	return t
}

// collectors returns the metrics to register.
func (t *TrustBundleMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.published, t.anchors, t.info, t.writes, t.errors, t.errorTimes, t.reports}
}

// ObservePublished records that signer's bundle, whose trustBundle hashes to hash, was
// written or found up to date at when and holds anchors[state] certificates of each state
// (one of TrustBundleStates; a state absent from anchors is 0, other keys are ignored). The
// info series of the previous hash, if another, is deleted.
func (t *TrustBundleMetrics) ObservePublished(signer, hash string, anchors map[string]int, when time.Time) {
	if t == nil {
		return
	}
	t.published.WithLabelValues(signer).Set(float64(when.UnixNano()) / 1e9)
	for _, state := range TrustBundleStates() {
		t.anchors.WithLabelValues(signer, state).Set(float64(anchors[state]))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.hashes[signer]; ok && old != hash {
		t.info.DeleteLabelValues(signer, old)
	}
	t.hashes[signer] = hash
	t.info.WithLabelValues(signer, hash).Set(1)
}

// ObserveWrite counts one write of signer's bundle: TrustBundleCreated or TrustBundleUpdated.
func (t *TrustBundleMetrics) ObserveWrite(signer, operation string) {
	if t == nil {
		return
	}
	t.writes.WithLabelValues(signer, operation).Inc()
}

// ObserveError counts one failed attempt, at when, to publish signer's bundle, for reason.
func (t *TrustBundleMetrics) ObserveError(signer, reason string, when time.Time) {
	if t == nil {
		return
	}
	t.errors.WithLabelValues(signer, reason).Inc()
	t.errorTimes.WithLabelValues(signer, reason).Set(float64(when.UnixNano()) / 1e9)
}

// ObserveReport counts one report of signer's published bundle to the signing server, with
// outcome (one of TrustBundleReportOutcomes).
func (t *TrustBundleMetrics) ObserveReport(signer, outcome string) {
	if t == nil {
		return
	}
	t.reports.WithLabelValues(signer, outcome).Inc()
}

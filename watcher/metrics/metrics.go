// Package metrics holds the Prometheus metrics of signet-watcher, on a registry of their own
// (with the Go runtime and process collectors), and serves them over HTTP.
//
// Label values are bounded: signer is a served signer name, outcome one of the CSR or
// PodCertificateRequest signing controller's outcomes, reason one of the ClusterTrustBundle
// publisher's error reasons, operation created or updated, method a gRPC method of the signing
// service and code a gRPC status code name.
package metrics

import (
	"net/http"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"

	"github.com/signet-pki/signet/internal/version"
)

const (
	namespace = "signet"
	subsystem = "watcher"
)

// issuanceBuckets cover a fast path (tens of milliseconds from approval seen to status) to a
// server outage retried with back-off (minutes).
var issuanceBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// rpcBuckets cover a local signing server (a millisecond) to the RPC timeout.
var rpcBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Queue is what the queue gauges read at scrape time: a running signing controller.
type Queue interface {
	// QueueDepth is the number of objects waiting in the work queue.
	QueueDepth() int
	// OldestPending is, per signer name, the age of the oldest object still to be signed:
	// since approval for a CSR, since creation for a PodCertificateRequest.
	OldestPending() map[string]time.Duration
}

// Metrics records the watcher's metrics. Its methods are safe for concurrent use, and a nil
// *Metrics records nothing, so tests may leave it out.
type Metrics struct {
	registry *prometheus.Registry

	rpcDuration *prometheus.HistogramVec
	rpcErrors   *prometheus.CounterVec
	leader      prometheus.Gauge

	csrs, pcrs   *ControllerMetrics
	trustBundles *TrustBundleMetrics
	witness      *WitnessMetrics
}

// ControllerMetrics records one signing controller's metrics: objects handled by outcome,
// issuance latency, and the queue gauges read at scrape time. A nil *ControllerMetrics
// records nothing.
type ControllerMetrics struct {
	signers       []string
	handled       *prometheus.CounterVec
	issuance      *prometheus.HistogramVec
	queueDepth    *prometheus.Desc
	oldestPending *prometheus.Desc

	mu    sync.RWMutex
	queue Queue
}

// controllerNames are a controller's metric names and help texts.
type controllerNames struct {
	handled, handledHelp             string
	issuance, issuanceHelp           string
	queueDepth, queueDepthHelp       string
	oldestPending, oldestPendingHelp string
}

// issuanceHelp is the help of signet_watcher_issuance_latency_seconds; it names the clock,
// since the Approved condition's timestamp alone (whole seconds) would add up to a second to
// latencies of milliseconds.
const issuanceHelp = "Time from when the watcher saw a CSR approved (the Approved condition's whole-second timestamp " +
	"when the watcher saw it more than a second later, e.g. after a restart) to its certificate written in status, by signer."

// csrNames and pcrNames name the CSR and the PodCertificateRequest controllers' metrics.
var (
	csrNames = controllerNames{
		handled: "objects_handled_total", handledHelp: "CertificateSigningRequests handled by the signing controller, by signer and outcome.",
		issuance: "issuance_latency_seconds", issuanceHelp: issuanceHelp,
		queueDepth: "queue_depth", queueDepthHelp: "CertificateSigningRequests waiting in the signing controller's work queue (0 on a standby).",
		oldestPending:     "oldest_pending_approved_seconds",
		oldestPendingHelp: "Age of the oldest approved CertificateSigningRequest not yet signed or failed, by signer (0 when none, or on a standby).",
	}
	pcrNames = controllerNames{
		handled: "pod_certificate_requests_handled_total", handledHelp: "PodCertificateRequests handled by the signing controller, by signer and outcome.",
		issuance: "pod_certificate_issuance_latency_seconds", issuanceHelp: "Time from a PodCertificateRequest's creation to its Issued status written, by signer.",
		queueDepth: "pod_certificate_queue_depth", queueDepthHelp: "PodCertificateRequests waiting in the signing controller's work queue (0 on a standby or without the controller).",
		oldestPending:     "oldest_pending_pod_certificate_seconds",
		oldestPendingHelp: "Age of the oldest PodCertificateRequest not yet issued or denied, by signer (0 when none, on a standby, or without the controller).",
	}
)

// newControllerMetrics creates one controller's metrics with a handled series per signer and
// outcome from the start (at 0).
func newControllerMetrics(n controllerNames, signers, outcomes []string) *ControllerMetrics {
	c := &ControllerMetrics{
		signers: signers,
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: n.handled, Help: n.handledHelp,
		}, []string{"signer", "outcome"}),
		issuance: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: n.issuance, Help: n.issuanceHelp, Buckets: issuanceBuckets,
		}, []string{"signer"}),
		queueDepth:    prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, n.queueDepth), n.queueDepthHelp, nil, nil),
		oldestPending: prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, n.oldestPending), n.oldestPendingHelp, []string{"signer"}, nil),
	}
	for _, signer := range signers {
		for _, outcome := range outcomes {
			c.handled.WithLabelValues(signer, outcome)
		}
	}
	return c
}

// New creates the metrics for the served signers on a new registry holding them and the Go
// runtime and process collectors. signet_watcher_objects_handled_total has a series per
// signer and CSR outcome in outcomes, signet_watcher_pod_certificate_requests_handled_total
// one per signer and PodCertificateRequest outcome in pcrOutcomes,
// signet_watcher_trust_bundle_publish_errors_total one per signer and reason in
// trustBundleReasons, and the oldest-pending gauges one per signer, from the start (at 0), so
// an empty dashboard never means "not scraped".
func New(signers, outcomes, pcrOutcomes, trustBundleReasons []string) *Metrics {
	sorted := slices.Compact(slices.Sorted(slices.Values(signers)))
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		rpcDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "server_rpc_duration_seconds",
			Help:    "Duration of calls to the signing server, by gRPC method and status code.",
			Buckets: rpcBuckets,
		}, []string{"method", "code"}),
		rpcErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "server_rpc_errors_total",
			Help: "Calls to the signing server that did not return OK, by gRPC method and status code.",
		}, []string{"method", "code"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "leader",
			Help: "1 while this replica holds the leader Lease and runs the controllers, else 0.",
		}),
		csrs:         newControllerMetrics(csrNames, sorted, outcomes),
		pcrs:         newControllerMetrics(pcrNames, sorted, pcrOutcomes),
		trustBundles: newTrustBundleMetrics(sorted, trustBundleReasons),
		witness:      newWitnessMetrics(),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.rpcDuration, m.rpcErrors, m.leader,
		m.csrs.handled, m.csrs.issuance, m.csrs,
		m.pcrs.handled, m.pcrs.issuance, m.pcrs,
	)
	m.registry.MustRegister(m.trustBundles.collectors()...)
	m.registry.MustRegister(m.witness.collectors()...)
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "build_info",
		Help: "Always 1; the labels name the running build.",
	}, []string{"version", "commit", "go_version"})
	buildInfo.WithLabelValues(version.Version, version.Commit, runtime.Version()).Set(1)
	m.registry.MustRegister(buildInfo)
	return m
}

// TrustBundles returns the recorder of the ClusterTrustBundle publisher's metrics; nil for a
// nil m.
func (m *Metrics) TrustBundles() *TrustBundleMetrics {
	if m == nil {
		return nil
	}
	return m.trustBundles
}

// CSRs returns the recorder of the CSR signing controller's metrics; nil for a nil m.
func (m *Metrics) CSRs() *ControllerMetrics {
	if m == nil {
		return nil
	}
	return m.csrs
}

// PodCertificates returns the recorder of the PodCertificateRequest signing controller's
// metrics; nil for a nil m.
func (m *Metrics) PodCertificates() *ControllerMetrics {
	if m == nil {
		return nil
	}
	return m.pcrs
}

// Handler serves the registry in the Prometheus exposition format, at most four scrapes at
// once and each bounded in time: every scrape lists the informer caches (OldestPending).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		Registry:            m.registry,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
}

// ObserveRPC records one call to the signing server; a code other than OK is also counted
// as an error.
func (m *Metrics) ObserveRPC(method string, code codes.Code, d time.Duration) {
	if m == nil {
		return
	}
	m.rpcDuration.WithLabelValues(method, code.String()).Observe(d.Seconds())
	if code != codes.OK {
		m.rpcErrors.WithLabelValues(method, code.String()).Inc()
	}
}

// SetLeader records whether this replica leads.
func (m *Metrics) SetLeader(leading bool) {
	if m == nil {
		return
	}
	if leading {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

// ObserveHandled counts one object handled for signer with outcome.
func (c *ControllerMetrics) ObserveHandled(signer, outcome string) {
	if c == nil {
		return
	}
	c.handled.WithLabelValues(signer, outcome).Inc()
}

// ObserveIssuanceLatency records the issuance latency of one object for signer: for a CSR,
// from when the watcher saw it approved (the Approved condition's whole-second timestamp when
// the watcher saw it more than a second later) to its certificate written in status; for a
// PodCertificateRequest, from creation to Issued written.
func (c *ControllerMetrics) ObserveIssuanceLatency(signer string, d time.Duration) {
	if c == nil {
		return
	}
	c.issuance.WithLabelValues(signer).Observe(d.Seconds())
}

// SetQueue sets the controller the queue gauges read at scrape time; nil (a standby, between
// leader terms, or no such controller) reports zeros.
func (c *ControllerMetrics) SetQueue(q Queue) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = q
}

// Describe implements prometheus.Collector for the queue gauges.
func (c *ControllerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queueDepth
	ch <- c.oldestPending
}

// Collect implements prometheus.Collector: the current Queue's depth and oldest-pending ages
// (zeros without one).
func (c *ControllerMetrics) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	q := c.queue
	c.mu.RUnlock()
	depth := 0
	var oldest map[string]time.Duration
	if q != nil {
		depth = q.QueueDepth()
		oldest = q.OldestPending()
	}
	ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(depth))
	for _, signer := range c.signers {
		ch <- prometheus.MustNewConstMetric(c.oldestPending, prometheus.GaugeValue, oldest[signer].Seconds(), signer)
	}
}

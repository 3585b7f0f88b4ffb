// Package metrics holds the Prometheus metrics of signet-watcher, on a registry of their own
// (with the Go runtime and process collectors), and serves them over HTTP.
//
// Label values are bounded: signer is a served signer name, outcome one of the CSR or
// PodCertificateRequest signing controller's outcomes, method a gRPC method of the signing
// service and code a gRPC status code name.
package metrics

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"
)

const (
	namespace = "signet"
	subsystem = "watcher"
)

// issuanceBuckets cover a fast path (tens of milliseconds from approval to status) to a
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
	signers  []string

	handled     *prometheus.CounterVec
	issuance    *prometheus.HistogramVec
	rpcDuration *prometheus.HistogramVec
	rpcErrors   *prometheus.CounterVec
	leader      prometheus.Gauge

	queueDepth    *prometheus.Desc
	oldestPending *prometheus.Desc

	pcrHandled       *prometheus.CounterVec
	pcrIssuance      *prometheus.HistogramVec
	pcrQueueDepth    *prometheus.Desc
	pcrOldestPending *prometheus.Desc

	mu       sync.RWMutex
	queue    Queue
	pcrQueue Queue
}

// New creates the metrics for the served signers on a new registry holding them and the Go
// runtime and process collectors. signet_watcher_objects_handled_total has a series per
// signer and CSR outcome in outcomes, signet_watcher_pod_certificate_requests_handled_total
// one per signer and PodCertificateRequest outcome in pcrOutcomes, and the oldest-pending
// gauges one per signer, from the start (at 0), so an empty dashboard never means "not
// scraped".
func New(signers, outcomes, pcrOutcomes []string) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		signers:  slices.Compact(slices.Sorted(slices.Values(signers))),
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "objects_handled_total",
			Help: "CertificateSigningRequests handled by the signing controller, by signer and outcome.",
		}, []string{"signer", "outcome"}),
		issuance: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "issuance_latency_seconds",
			Help:    "Time from a CSR's approval to its certificate written in status, by signer.",
			Buckets: issuanceBuckets,
		}, []string{"signer"}),
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
		queueDepth: prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, "queue_depth"),
			"CertificateSigningRequests waiting in the signing controller's work queue (0 on a standby).", nil, nil),
		oldestPending: prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, "oldest_pending_approved_seconds"),
			"Age of the oldest approved CertificateSigningRequest not yet signed or failed, by signer (0 when none, or on a standby).",
			[]string{"signer"}, nil),
	}
	m.addPodCertificateMetrics()
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.handled, m.issuance, m.rpcDuration, m.rpcErrors, m.leader, queueCollector{m},
		m.pcrHandled, m.pcrIssuance,
	)
	for _, signer := range m.signers {
		for _, outcome := range outcomes {
			m.handled.WithLabelValues(signer, outcome)
		}
		for _, outcome := range pcrOutcomes {
			m.pcrHandled.WithLabelValues(signer, outcome)
		}
	}
	return m
}

// addPodCertificateMetrics creates the PodCertificateRequest controller's metrics.
func (m *Metrics) addPodCertificateMetrics() {
	m.pcrHandled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "pod_certificate_requests_handled_total",
		Help: "PodCertificateRequests handled by the signing controller, by signer and outcome.",
	}, []string{"signer", "outcome"})
	m.pcrIssuance = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "pod_certificate_issuance_latency_seconds",
		Help:    "Time from a PodCertificateRequest's creation to its Issued status written, by signer.",
		Buckets: issuanceBuckets,
	}, []string{"signer"})
	m.pcrQueueDepth = prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, "pod_certificate_queue_depth"),
		"PodCertificateRequests waiting in the signing controller's work queue (0 on a standby or without the controller).", nil, nil)
	m.pcrOldestPending = prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, "oldest_pending_pod_certificate_seconds"),
		"Age of the oldest PodCertificateRequest not yet issued or denied, by signer (0 when none, on a standby, or without the controller).",
		[]string{"signer"}, nil)
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

// ObserveHandled counts one CSR handled for signer with outcome.
func (m *Metrics) ObserveHandled(signer, outcome string) {
	if m == nil {
		return
	}
	m.handled.WithLabelValues(signer, outcome).Inc()
}

// ObserveIssuanceLatency records the time from approval to status written for signer.
func (m *Metrics) ObserveIssuanceLatency(signer string, d time.Duration) {
	if m == nil {
		return
	}
	m.issuance.WithLabelValues(signer).Observe(d.Seconds())
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

// SetQueue sets the controller the queue gauges read at scrape time; nil (a standby, or
// between leader terms) reports zeros.
func (m *Metrics) SetQueue(q Queue) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue = q
}

// PodCertificateMetrics records the PodCertificateRequest signing controller's metrics. A
// nil *PodCertificateMetrics records nothing.
type PodCertificateMetrics struct{ m *Metrics }

// PodCertificates returns the recorder of the PodCertificateRequest controller's metrics;
// nil for a nil m.
func (m *Metrics) PodCertificates() *PodCertificateMetrics {
	if m == nil {
		return nil
	}
	return &PodCertificateMetrics{m}
}

// ObserveHandled counts one PodCertificateRequest handled for signer with outcome.
func (p *PodCertificateMetrics) ObserveHandled(signer, outcome string) {
	if p == nil {
		return
	}
	p.m.pcrHandled.WithLabelValues(signer, outcome).Inc()
}

// ObserveIssuanceLatency records the time from creation to Issued written for signer.
func (p *PodCertificateMetrics) ObserveIssuanceLatency(signer string, d time.Duration) {
	if p == nil {
		return
	}
	p.m.pcrIssuance.WithLabelValues(signer).Observe(d.Seconds())
}

// SetQueue sets the PodCertificateRequest controller the queue gauges read at scrape time;
// nil reports zeros.
func (p *PodCertificateMetrics) SetQueue(q Queue) {
	if p == nil {
		return
	}
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	p.m.pcrQueue = q
}

// queueCollector reads the queue gauges from the current Queue on every scrape.
type queueCollector struct{ m *Metrics }

// Describe implements prometheus.Collector.
func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.queueDepth
	ch <- c.m.oldestPending
	ch <- c.m.pcrQueueDepth
	ch <- c.m.pcrOldestPending
}

// Collect implements prometheus.Collector.
func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.RLock()
	q, pcrQ := c.m.queue, c.m.pcrQueue
	c.m.mu.RUnlock()
	c.collect(ch, q, c.m.queueDepth, c.m.oldestPending)
	c.collect(ch, pcrQ, c.m.pcrQueueDepth, c.m.pcrOldestPending)
}

// collect sends q's depth and oldest-pending gauges (zeros for a nil q).
func (c queueCollector) collect(ch chan<- prometheus.Metric, q Queue, depthDesc, oldestDesc *prometheus.Desc) {
	depth := 0
	var oldest map[string]time.Duration
	if q != nil {
		depth = q.QueueDepth()
		oldest = q.OldestPending()
	}
	ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(depth))
	for _, signer := range c.m.signers {
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, oldest[signer].Seconds(), signer)
	}
}

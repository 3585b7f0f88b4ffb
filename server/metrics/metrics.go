// Package metrics holds the Prometheus metrics of signet-server, on a registry of their own
// (with the Go runtime and process collectors), and serves them over HTTP.
//
// Label values are bounded: signer is always a served signer name or "unknown" (a name a
// client sent that the server does not serve), outcome is one of the Outcome constants,
// reason an ErrorReason name (of tls_client_refused_total: a TLSRefusalReasons value), limit
// "client" or "signer", lint a lint name from the configured lint set, client_version a
// release line vMAJOR.MINOR or "devel" (at most 16 values, then "other"), never a raw version.
package metrics

import (
	"net/http"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Request outcomes, the values of the outcome label of signet_server_requests_total.
const (
	OutcomeIssued           = "issued"
	OutcomeRefused          = "refused"
	OutcomeError            = "error"
	OutcomeRateLimited      = "rate_limited"
	OutcomeIdempotentReplay = "idempotent_replay"
)

// Outcomes lists every outcome; each served signer's requests_total series start at zero.
var Outcomes = []string{OutcomeIssued, OutcomeRefused, OutcomeError, OutcomeRateLimited, OutcomeIdempotentReplay}

// UnknownSigner is the signer label of requests naming a signer the server does not serve, so
// that names sent by clients never become label values.
const UnknownSigner = "unknown"

const (
	namespace = "signet"
	subsystem = "server"
)

// latencyBuckets cover 0.1 ms (a software key) to 1 s and above (a slow HSM or disk).
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// Metrics records the signing service's metrics. Its methods are safe for concurrent use,
// and a nil *Metrics records nothing, so tests may leave it out.
type Metrics struct {
	registry *prometheus.Registry

	signers map[string]bool // served signer names; read-only after New

	requests       *prometheus.CounterVec
	refusals       *prometheus.CounterVec
	signDuration   *prometheus.HistogramVec
	issuance       *prometheus.HistogramVec
	lintFailures   *prometheus.CounterVec
	lintAccepted   *prometheus.CounterVec
	rateLimited    *prometheus.CounterVec
	attestation    attestationMetrics
	caExpiry       *prometheus.GaugeVec
	ledgerAppend   prometheus.Histogram
	ledgerRecords  prometheus.Counter
	tlsRefused     *prometheus.CounterVec
	ledgerSpace    prometheus.Gauge       // ledgerspace.go
	ledgerGrowth   ledgerGrowth           // ledgerspace.go
	panics         *prometheus.CounterVec // panics.go
	clientVersions *clientVersionMetrics  // clientversion.go
	keyMetrics
	*rotationMetrics
	*webhookMetrics
	*ledgerMetrics
}

// New creates the metrics on a new registry holding them, the Go runtime and process
// collectors, and signet_server_build_info{version, commit, go_version} = 1. signers are the served
// signer names.
func New(version, commit string, signers []string) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		signers:  make(map[string]bool, len(signers)),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "requests_total",
			Help: "Signing requests answered, by signer and outcome (issued, refused, error, rate_limited, idempotent_replay).",
		}, []string{"signer", "outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "refusals_total",
			Help: "Signing requests refused, by signer and reason (the google.rpc.ErrorInfo reason).",
		}, []string{"signer", "reason"}),
		signDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "sign_duration_seconds",
			Help:    "Time to issue a certificate (parse, policy, lint, sign, ledger), by signer; issued certificates only.",
			Buckets: latencyBuckets,
		}, []string{"signer"}),
		issuance: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "issuance_duration_seconds",
			Help: "Time in the issuance pipeline (parse, policy, lint, sign, check), by signer; issued certificates only. " +
				"sign_duration_seconds is this plus the ledger append and bookkeeping.",
			Buckets: latencyBuckets,
		}, []string{"signer"}),
		lintFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "lint_failures_total",
			Help: "Certificates withheld because a lint failed, by signer and lint.",
		}, []string{"signer", "lint"}),
		lintAccepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "lint_accepted_findings_total",
			Help: "Lint findings on issued certificates that the signer's profile accepts by design (signetctl signers lists them with reasons), by signer and lint.",
		}, []string{"signer", "lint"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "rate_limited_total",
			Help: "Signing requests refused by a rate limit, by signer and limit (client or signer).",
		}, []string{"signer", "limit"}),
		caExpiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ca_certificate_expiry_timestamp_seconds",
			Help: "NotAfter of each signer's CA certificate, in seconds since the Unix epoch.",
		}, []string{"signer"}),
		ledgerAppend: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_append_duration_seconds",
			Help:    "Time to append (and sync) one ledger record.",
			Buckets: latencyBuckets,
		}),
		ledgerRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "ledger_records_total",
			Help: "Ledger records appended since the server started.",
		}),
		tlsRefused:      newTLSRefused(),
		keyMetrics:      newKeyMetrics(),
		rotationMetrics: newRotationMetrics(),
		webhookMetrics:  newWebhookMetrics(),
		ledgerMetrics:   newLedgerMetrics(),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "build_info",
		Help: "Always 1; the labels name the running build.",
	}, []string{"version", "commit", "go_version"})
	buildInfo.WithLabelValues(version, commit, runtime.Version()).Set(1)
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo, m.requests, m.refusals, m.signDuration, m.issuance, m.lintFailures, m.lintAccepted, m.rateLimited,
		m.caExpiry, m.ledgerAppend, m.ledgerRecords, m.tlsRefused,
	)
	m.registry.MustRegister(m.keyMetrics.collectors()...)
	m.registry.MustRegister(m.rotationMetrics.collectors()...)
	m.registry.MustRegister(m.webhookMetrics.collectors()...)
	m.registry.MustRegister(m.ledgerMetrics.collectors()...)
	m.ledgerSpace = newLedgerSpace(m.registry)
	m.ledgerGrowth = newLedgerGrowth(m.registry)
	m.panics = newPanics(m.registry)
	m.clientVersions = newClientVersionMetrics(m.registry, version)
	m.attestation = newAttestationMetrics(m.registry)
	m.SetLedgerState(LedgerOK)
	// The served signers are fixed for the server's life: their requests_total series (every
	// outcome), sign_duration_seconds and issuance_duration_seconds series exist from the
	// start, at zero; other names are recorded as signer="unknown".
	for _, sg := range signers {
		m.signers[sg] = true
	}
	for _, sg := range append(slices.Clone(signers), UnknownSigner) {
		for _, o := range Outcomes {
			m.requests.WithLabelValues(sg, o)
		}
		m.signDuration.WithLabelValues(sg)
		m.issuance.WithLabelValues(sg)
	}
	return m
}

// signer returns name if it is served, else UnknownSigner.
func (m *Metrics) signer(name string) string {
	if m.signers[name] {
		return name
	}
	return UnknownSigner
}

// ObserveRequest counts one answered request with its outcome (an Outcome constant). d is
// the time the request spent in the service; it feeds sign_duration_seconds only for
// OutcomeIssued, so fast refusals and replays do not skew the signing latency.
func (m *Metrics) ObserveRequest(signer, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	s := m.signer(signer)
	m.requests.WithLabelValues(s, outcome).Inc()
	if outcome == OutcomeIssued {
		m.signDuration.WithLabelValues(s).Observe(d.Seconds())
	}
}

// ObserveIssuance records the time d one certificate spent in the issuance pipeline, from the
// parse of its request to the check of the signed certificate. Call it for issued
// certificates only, like sign_duration_seconds, whose share it is.
func (m *Metrics) ObserveIssuance(signer string, d time.Duration) {
	if m == nil {
		return
	}
	m.issuance.WithLabelValues(m.signer(signer)).Observe(d.Seconds())
}

// ObserveRefusal counts one refusal with its reason (an ErrorInfo reason such as
// POLICY_VIOLATION). It is counted in addition to ObserveRequest's outcome.
func (m *Metrics) ObserveRefusal(signer, reason string) {
	if m == nil {
		return
	}
	m.refusals.WithLabelValues(m.signer(signer), reason).Inc()
}

// ObserveLintFailure counts one failed lint on a certificate that was then withheld.
func (m *Metrics) ObserveLintFailure(signer, lint string) {
	if m == nil {
		return
	}
	m.lintFailures.WithLabelValues(m.signer(signer), lint).Inc()
}

// ObserveLintAccepted counts one finding of a lint whose findings the signer's profile accepts
// by design, on a certificate that was issued.
func (m *Metrics) ObserveLintAccepted(signer, lint string) {
	if m == nil {
		return
	}
	m.lintAccepted.WithLabelValues(m.signer(signer), lint).Inc()
}

// ObserveRateLimited counts one request refused by limit ("client" or "signer", as
// access.Limiter.Allow reports it).
func (m *Metrics) ObserveRateLimited(signer, limit string) {
	if m == nil {
		return
	}
	m.rateLimited.WithLabelValues(m.signer(signer), limit).Inc()
}

// SetCAExpiry records the NotAfter of signer's CA certificate. Names that are not served
// are ignored: an "unknown" expiry would mean nothing.
func (m *Metrics) SetCAExpiry(signer string, notAfter time.Time) {
	if m == nil || m.signer(signer) == UnknownSigner {
		return
	}
	m.caExpiry.WithLabelValues(signer).Set(float64(notAfter.Unix()))
}

// ObserveLedgerAppend records one ledger record (issuance or refusal) appended in d. Call it
// after a successful append only; a failed append fails the request, which ObserveRequest
// counts.
func (m *Metrics) ObserveLedgerAppend(d time.Duration) {
	if m == nil {
		return
	}
	m.ledgerAppend.Observe(d.Seconds())
	m.ledgerRecords.Inc()
}

// Registry returns the registry, for collectors added later (gRPC server metrics, say).
func (m *Metrics) Registry() *prometheus.Registry {
	return m.registry
}

// Handler serves the registry in the Prometheus exposition format, at most four scrapes at
// once, and counts its own scrapes (promhttp_metric_handler_requests_total).
func (m *Metrics) Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(m.registry, promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		Registry:            m.registry,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
}

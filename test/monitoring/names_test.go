// Package monitoring tests deploy/monitoring: the alert rules (plain file and PrometheusRule)
// and the Grafana dashboard parse with Prometheus' own libraries and name only metrics that
// signet-server and signet-watcher export, with labels they carry; and the certificate expiry
// gauges follow reloads end to end.
package monitoring

import (
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"

	servermetrics "github.com/signet-pki/signet/server/metrics"
	watchermetrics "github.com/signet-pki/signet/watcher/metrics"
)

// targetLabels are the labels Prometheus adds to every scraped series (the target's instance
// and job, and what Kubernetes service discovery and the Prometheus Operator attach); a
// selector may match on them besides a metric's own labels.
var targetLabels = []string{"instance", "job", "namespace", "pod", "container", "service", "endpoint", "node", "cluster"}

// series is what the rules and the dashboard may select: every exported name with the label
// names its series carry.
type series map[string]map[string]bool

// has reports whether name is exported.
func (s series) has(name string) bool { _, ok := s[name]; return ok }

// hasLabel reports whether name's series carry label, or Prometheus adds it at scrape.
func (s series) hasLabel(name, label string) bool {
	return label == model.MetricNameLabel || s[name][label] || slices.Contains(targetLabels, label)
}

// names lists the exported names, for error messages.
func (s series) names() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// exported scrapes a real signet-server and signet-watcher metrics registry, after recording
// one observation with every method, so that vectors without series at start (refusals by
// reason, key operations, rotation steps, ...) are listed too. A histogram exports
// name_bucket (with le), name_sum and name_count; a summary name (with quantile), name_sum and
// name_count. A metric added to server/metrics or watcher/metrics whose series appear only
// once recorded must be recorded here too, or the rules naming it fail as unknown.
func exported(t *testing.T) series {
	t.Helper()
	const signer = "example.com/signer"
	now := time.Now()
	cert := &x509.Certificate{NotAfter: now.Add(time.Hour)}

	sm := servermetrics.New("v0.0.0", "abc1234", []string{signer})
	sm.ObserveRequest(signer, servermetrics.OutcomeIssued, time.Millisecond)
	sm.ObserveIssuance(signer, time.Millisecond)
	sm.ObserveRefusal(signer, "POLICY_VIOLATION")
	sm.ObserveLintFailure(signer, "e_lint")
	sm.ObserveLintAccepted(signer, "w_lint")
	sm.ObserveRateLimited(signer, "client")
	sm.SetCAExpiry(signer, now)
	sm.ObserveLedgerAppend(time.Millisecond)
	sm.ObserveKeyOperation(signer, "file", "ok", time.Millisecond)
	sm.SetKeyAvailable(signer, true)
	sm.SetAnchors(signer, map[string]int{"active": 1})
	sm.ObserveReport(signer, "cluster", "hash", now)
	sm.ObserveRotation(signer, "activate", true)
	sm.WatchTLSCertificate(func() *x509.Certificate { return cert })
	sm.ObserveTLSClientRefused(servermetrics.TLSRefusedExpired)
	sm.ObserveClientVersionRefused("v0.9.0")
	sm.ObserveWebhookRequest(http.StatusOK, time.Millisecond)
	sm.SetInsecure(signer)
	sm.ObserveAttestation("challenge", "ok")

	wm := watchermetrics.New([]string{signer}, []string{"signed"}, []string{"signed"}, []string{"Forbidden"})
	wm.ObserveRPC("SignCertificateSigningRequest", codes.Unavailable, time.Millisecond)
	wm.SetLeader(true)
	for _, c := range []*watchermetrics.ControllerMetrics{wm.CSRs(), wm.PodCertificates()} {
		c.ObserveHandled(signer, "signed")
		c.ObserveIssuanceLatency(signer, time.Second)
	}
	tb := wm.TrustBundles()
	tb.ObservePublished(signer, "hash", map[string]int{watchermetrics.TrustBundleActive: 1}, now)
	tb.ObserveWrite(signer, watchermetrics.TrustBundleCreated)
	tb.ObserveError(signer, "Forbidden", now)
	tb.ObserveReport(signer, watchermetrics.TrustBundleReported)
	wm.WatchClientCertificate(func() *x509.Certificate { return cert })

	// Prometheus' own series for every target: whether its last scrape succeeded.
	out := series{"up": {}}
	for _, h := range []http.Handler{sm.Handler(), wm.Handler()} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
		if err != nil {
			t.Fatalf("parsing the exposition: %v", err)
		}
		for name, mf := range families {
			labels := map[string]bool{}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = true
				}
			}
			switch mf.GetType().String() {
			case "HISTOGRAM":
				out[name+"_bucket"] = with(labels, "le")
				out[name+"_sum"], out[name+"_count"] = labels, labels
			case "SUMMARY":
				out[name] = with(labels, "quantile")
				out[name+"_sum"], out[name+"_count"] = labels, labels
			default:
				out[name] = labels
			}
		}
	}
	return out
}

// with returns a copy of labels with one more.
func with(labels map[string]bool, extra string) map[string]bool {
	out := map[string]bool{extra: true}
	for l := range labels {
		out[l] = true
	}
	return out
}

// TestExportedCoversTheNewGauges guards exported itself: the metrics this folder was built
// around must be in it.
func TestExportedCoversTheNewGauges(t *testing.T) {
	s := exported(t)
	for _, name := range []string{
		"signet_server_tls_certificate_expiry_timestamp_seconds",
		"signet_watcher_client_certificate_expiry_timestamp_seconds",
		"signet_server_ca_certificate_expiry_timestamp_seconds",
		"signet_server_refusals_total",
		"signet_server_sign_duration_seconds_bucket",
		"signet_server_ca_rotation_forced_total",
		"signet_server_tls_client_refused_total",
		"signet_server_client_version_refused_total",
		"signet_server_webhook_requests_total",
		"signet_server_webhook_request_duration_seconds_bucket",
		"signet_watcher_oldest_pending_approved_seconds",
		"signet_watcher_oldest_pending_pod_certificate_seconds",
		"signet_watcher_trust_bundle_publish_errors_total",
	} {
		if !s.has(name) {
			t.Errorf("%s is not exported; exported: %v", name, s.names())
		}
	}
	if !s.hasLabel("signet_server_refusals_total", "reason") || s.hasLabel("signet_server_refusals_total", "code") {
		t.Errorf("labels of signet_server_refusals_total = %v, want signer and reason", s["signet_server_refusals_total"])
	}
}

package metrics

import (
	"crypto/x509"
	"io"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/signet-pki/signet/internal/metricstest"
	"github.com/signet-pki/signet/internal/version"
)

// fakeQueue is a controller's queue as the gauges see it.
type fakeQueue struct {
	depth  int
	oldest map[string]time.Duration
}

func (q fakeQueue) QueueDepth() int                         { return q.depth }
func (q fakeQueue) OldestPending() map[string]time.Duration { return q.oldest }

// scrape returns the /metrics exposition of m.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// checkLines fails the test for every line of want missing from the exposition got.
func checkLines(t *testing.T, got string, want ...string) {
	t.Helper()
	lines := make(map[string]bool)
	for _, l := range strings.Split(got, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("/metrics lacks the line %q", w)
		}
	}
}

// TestMetricsExposition scrapes every watcher metric (without prometheus/testutil, whose
// dependencies this module does not carry; see server/metrics).
func TestMetricsExposition(t *testing.T) {
	m := New([]string{"example.com/b", "example.com/a", "example.com/a"}, []string{"signed", "failed"}, []string{"signed", "denied"},
		[]string{"Forbidden", "NotOwned"})
	csrs := m.CSRs()
	csrs.ObserveHandled("example.com/a", "signed")
	csrs.ObserveHandled("example.com/a", "signed")
	csrs.ObserveIssuanceLatency("example.com/a", 1500*time.Millisecond)
	m.ObserveRPC("SignCertificateSigningRequest", codes.OK, 3*time.Millisecond)
	m.ObserveRPC("SignCertificateSigningRequest", codes.Unavailable, time.Second)
	m.SetLeader(true)
	csrs.SetQueue(fakeQueue{depth: 7, oldest: map[string]time.Duration{"example.com/a": 90 * time.Second}})
	pcr := m.PodCertificates()
	pcr.ObserveHandled("example.com/b", "denied")
	pcr.ObserveIssuanceLatency("example.com/b", 300*time.Millisecond)
	pcr.SetQueue(fakeQueue{depth: 3, oldest: map[string]time.Duration{"example.com/b": 42 * time.Second}})
	bundles := m.TrustBundles()
	bundles.ObservePublished("example.com/a", "0a1b", map[string]int{TrustBundleActive: 2}, time.Unix(1700000000, 500_000_000))
	bundles.ObserveWrite("example.com/a", TrustBundleCreated)
	bundles.ObserveError("example.com/b", "Forbidden", time.Unix(1700000001, 0))
	bundles.ObserveError("example.com/b", "Forbidden", time.Unix(1700000002, 0))
	bundles.ObserveReport("example.com/a", TrustBundleReported)

	checkLines(t, scrape(t, m),
		"# TYPE signet_watcher_build_info gauge",
		`signet_watcher_build_info{commit="`+version.Commit+`",go_version="`+runtime.Version()+`",version="`+version.Version+`"} 1`,
		"# TYPE signet_watcher_leader gauge",
		"signet_watcher_leader 1",
		"# TYPE signet_watcher_objects_handled_total counter",
		`signet_watcher_objects_handled_total{outcome="failed",signer="example.com/a"} 0`,
		`signet_watcher_objects_handled_total{outcome="failed",signer="example.com/b"} 0`,
		`signet_watcher_objects_handled_total{outcome="signed",signer="example.com/a"} 2`,
		`signet_watcher_objects_handled_total{outcome="signed",signer="example.com/b"} 0`,
		"# TYPE signet_watcher_oldest_pending_approved_seconds gauge",
		`signet_watcher_oldest_pending_approved_seconds{signer="example.com/a"} 90`,
		`signet_watcher_oldest_pending_approved_seconds{signer="example.com/b"} 0`,
		"# TYPE signet_watcher_queue_depth gauge",
		"signet_watcher_queue_depth 7",
		"# HELP signet_watcher_issuance_latency_seconds Time from when the watcher saw a CSR approved (the Approved condition's "+
			"whole-second timestamp when the watcher saw it more than a second later, e.g. after a restart) to its certificate "+
			"written in status, by signer.",
		"# TYPE signet_watcher_issuance_latency_seconds histogram",
		`signet_watcher_issuance_latency_seconds_count{signer="example.com/a"} 1`,
		`signet_watcher_issuance_latency_seconds_bucket{signer="example.com/a",le="2.5"} 1`,
		`signet_watcher_issuance_latency_seconds_bucket{signer="example.com/a",le="1"} 0`,
		"# TYPE signet_watcher_server_rpc_duration_seconds histogram",
		`signet_watcher_server_rpc_duration_seconds_count{code="OK",method="SignCertificateSigningRequest"} 1`,
		`signet_watcher_server_rpc_duration_seconds_count{code="Unavailable",method="SignCertificateSigningRequest"} 1`,
		"# TYPE signet_watcher_server_rpc_errors_total counter",
		`signet_watcher_server_rpc_errors_total{code="Unavailable",method="SignCertificateSigningRequest"} 1`,
		"# TYPE signet_watcher_pod_certificate_requests_handled_total counter",
		`signet_watcher_pod_certificate_requests_handled_total{outcome="denied",signer="example.com/b"} 1`,
		`signet_watcher_pod_certificate_requests_handled_total{outcome="signed",signer="example.com/a"} 0`,
		`signet_watcher_pod_certificate_requests_handled_total{outcome="signed",signer="example.com/b"} 0`,
		"# TYPE signet_watcher_pod_certificate_issuance_latency_seconds histogram",
		`signet_watcher_pod_certificate_issuance_latency_seconds_bucket{signer="example.com/b",le="0.25"} 0`,
		`signet_watcher_pod_certificate_issuance_latency_seconds_bucket{signer="example.com/b",le="0.5"} 1`,
		"signet_watcher_pod_certificate_queue_depth 3",
		`signet_watcher_oldest_pending_pod_certificate_seconds{signer="example.com/a"} 0`,
		`signet_watcher_oldest_pending_pod_certificate_seconds{signer="example.com/b"} 42`,
		"# TYPE signet_watcher_trust_bundle_published_timestamp_seconds gauge",
		`signet_watcher_trust_bundle_published_timestamp_seconds{signer="example.com/a"} 1.7000000005e+09`,
		"# TYPE signet_watcher_trust_bundle_anchors gauge",
		`signet_watcher_trust_bundle_anchors{signer="example.com/a",state="active"} 2`,
		`signet_watcher_trust_bundle_anchors{signer="example.com/a",state="staged"} 0`,
		"# TYPE signet_watcher_trust_bundle_info gauge",
		`signet_watcher_trust_bundle_info{hash="0a1b",signer="example.com/a"} 1`,
		"# TYPE signet_watcher_trust_bundle_writes_total counter",
		`signet_watcher_trust_bundle_writes_total{operation="created",signer="example.com/a"} 1`,
		`signet_watcher_trust_bundle_writes_total{operation="updated",signer="example.com/a"} 0`,
		`signet_watcher_trust_bundle_writes_total{operation="created",signer="example.com/b"} 0`,
		"# TYPE signet_watcher_trust_bundle_publish_errors_total counter",
		`signet_watcher_trust_bundle_publish_errors_total{reason="Forbidden",signer="example.com/a"} 0`,
		`signet_watcher_trust_bundle_publish_errors_total{reason="Forbidden",signer="example.com/b"} 2`,
		`signet_watcher_trust_bundle_publish_errors_total{reason="NotOwned",signer="example.com/b"} 0`,
		"# TYPE signet_watcher_trust_bundle_publish_error_timestamp_seconds gauge",
		`signet_watcher_trust_bundle_publish_error_timestamp_seconds{reason="Forbidden",signer="example.com/b"} 1.700000002e+09`,
		"# TYPE signet_watcher_trust_bundle_reports_total counter",
		`signet_watcher_trust_bundle_reports_total{outcome="reported",signer="example.com/a"} 1`,
		`signet_watcher_trust_bundle_reports_total{outcome="refused",signer="example.com/a"} 0`,
		`signet_watcher_trust_bundle_reports_total{outcome="failed",signer="example.com/b"} 0`,
		`signet_watcher_trust_bundle_reports_total{outcome="unsupported",signer="example.com/b"} 0`,
	)
	if got := scrape(t, m); strings.Contains(got, `signet_watcher_trust_bundle_published_timestamp_seconds{signer="example.com/b"}`) {
		t.Error("a signer never published has a published timestamp")
	}
	if got := scrape(t, m); strings.Contains(got, `signet_watcher_server_rpc_errors_total{code="OK"`) {
		t.Error("an OK call was counted as an error")
	}

	// A standby: no controller, zeros, leader 0.
	csrs.SetQueue(nil)
	pcr.SetQueue(nil)
	m.SetLeader(false)
	checkLines(t, scrape(t, m),
		"signet_watcher_leader 0",
		"signet_watcher_queue_depth 0",
		`signet_watcher_oldest_pending_approved_seconds{signer="example.com/a"} 0`,
		"signet_watcher_pod_certificate_queue_depth 0",
		`signet_watcher_oldest_pending_pod_certificate_seconds{signer="example.com/b"} 0`,
	)
}

func TestHandlerServesRuntimeAndOwnMetrics(t *testing.T) {
	body := scrape(t, New([]string{"example.com/a"}, nil, nil, nil))
	for _, want := range []string{"go_goroutines", "process_start_time_seconds"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestNilMetricsRecordsNothing: every exported method of *Metrics, and of the controller,
// trust bundle and witness metrics it hands out, found by reflection so that a new one is
// covered without editing this test, can be called on a nil *Metrics (and on the nil
// sub-metrics a nil *Metrics hands out) without panicking; and each call, made on a new
// *Metrics with the same arguments, shows in its registry, so that the nil receiver's silence
// is a choice and not a call that records nothing anyway. Only the methods in notRecording are
// left out, each for its reason.
func TestNilMetricsRecordsNothing(t *testing.T) {
	seen := map[string]bool{}
	checkMethods(t, reflect.TypeFor[*Metrics](), nil, seen)
	for name := range notRecording {
		if !seen[name] {
			t.Errorf("notRecording names %s, which no longer exists", name)
		}
	}
}

// notRecording are the methods, as Type.Method, that record nothing, so the nil contract does
// not cover them.
var notRecording = map[string]string{
	"Metrics.Handler":            "serves the registry, which exists only in a *Metrics made by New",
	"ControllerMetrics.Describe": "prometheus.Collector: called by the registry New registered it in, never on nil",
	"ControllerMetrics.Collect":  "prometheus.Collector: called by the registry New registered it in, never on nil",
}

// checkMethods checks every exported method of typ (a pointer to one of this package's
// metrics types) reached from a *Metrics through the accessors path: an accessor (no
// argument, one result of such a type) must hand out nil from a nil receiver and non-nil from
// a new *Metrics, and the methods of what it hands out are checked in turn; any other method
// goes through checkNilRecordsNothing.
func checkMethods(t *testing.T, typ reflect.Type, path []string, seen map[string]bool) {
	t.Helper()
	for i := range typ.NumMethod() {
		method := typ.Method(i)
		name := typ.Elem().Name() + "." + method.Name
		seen[name] = true
		if _, ok := notRecording[name]; ok {
			continue
		}
		calls := append(slices.Clone(path), method.Name)
		what := strings.Join(calls, "().")
		if method.Type.NumIn() == 1 && method.Type.NumOut() == 1 && isMetricsType(method.Type.Out(0)) {
			t.Run(what, func(t *testing.T) {
				var got reflect.Value
				if p := metricstest.Recover(func() { got = follow(nil, calls) }); p != nil {
					t.Fatalf("%s() on a nil *Metrics panics: %v", what, p)
				}
				if !got.IsNil() {
					t.Errorf("%s() on a nil *Metrics = %v, want nil (which records nothing)", what, got)
				}
				if follow(New([]string{signerA}, nil, nil, nil), calls).IsNil() {
					t.Errorf("%s() on a new *Metrics is nil", what)
				}
			})
			checkMethods(t, method.Type.Out(0), calls, seen)
			continue
		}
		t.Run(what, func(t *testing.T) {
			args := metricstest.Args(t, name, method, representative, representativeOverrides)
			checkNilRecordsNothing(t, what, func(m *Metrics) {
				follow(m, path).MethodByName(method.Name).Call(args)
			})
		})
	}
}

// isMetricsType reports whether typ is a pointer to a type of this package with methods.
func isMetricsType(typ reflect.Type) bool {
	return typ.Kind() == reflect.Pointer && typ.Elem().PkgPath() == reflect.TypeFor[Metrics]().PkgPath() && typ.NumMethod() > 0
}

// follow calls the accessors path on m in turn and returns the last one's result (m itself
// for an empty path).
func follow(m *Metrics, path []string) reflect.Value {
	v := reflect.ValueOf(m)
	for _, accessor := range path {
		v = v.MethodByName(accessor).Call(nil)[0]
	}
	return v
}

const signerA = "example.com/a"

// representative holds, by type, the argument TestNilMetricsRecordsNothing passes to a method:
// a value that records (every string is a served signer).
var representative = map[reflect.Type]any{
	reflect.TypeFor[string]():         signerA,
	reflect.TypeFor[[]string]():       []string{signerA},
	reflect.TypeFor[bool]():           true,
	reflect.TypeFor[int64]():          int64(42),
	reflect.TypeFor[codes.Code]():     codes.Unavailable,
	reflect.TypeFor[time.Duration]():  3 * time.Millisecond,
	reflect.TypeFor[time.Time]():      time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
	reflect.TypeFor[map[string]int](): map[string]int{TrustBundleActive: 2},
	reflect.TypeFor[Queue]():          fakeQueue{depth: 3, oldest: map[string]time.Duration{signerA: time.Minute}},
	reflect.TypeFor[func() *x509.Certificate](): func() *x509.Certificate {
		return &x509.Certificate{NotAfter: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	},
}

// representativeOverrides are the arguments of the methods (Type.Method) whose parameters'
// representative values would record nothing new on a new *Metrics (the state it starts in).
var representativeOverrides = map[string][]any{
	"WitnessMetrics.SetConsistent": {false}, // it starts consistent
}

// checkNilRecordsNothing calls record on a nil *Metrics and fails the test, naming what, if it
// panics; then calls it on a new *Metrics and fails unless the scrape of the signet_watcher_
// series differs after the call.
func checkNilRecordsNothing(t *testing.T, what string, record func(*Metrics)) {
	t.Helper()
	metricstest.NilRecordsNothing(t, what, record, func() (*Metrics, prometheus.Gatherer) {
		m := New([]string{signerA}, []string{"signed"}, []string{"signed"}, []string{"Forbidden"})
		return m, m.registry
	}, namespace+"_"+subsystem+"_")
}

// TestTrustBundleMetrics: anchors are counted by state, the info series follows the hash
// (the old one deleted), and a signer never published or never failed has no such series.
func TestTrustBundleMetrics(t *testing.T) {
	m := New([]string{"example.com/a", "example.com/b"}, nil, nil, []string{"APIError"})
	bundles := m.TrustBundles()
	bundles.ObservePublished("example.com/a", "1111", map[string]int{TrustBundleActive: 1}, time.Unix(1700000000, 0))
	bundles.ObservePublished("example.com/a", "2222",
		map[string]int{TrustBundleActive: 1, TrustBundleStaged: 1, TrustBundleRetired: 2, "bogus": 7}, time.Unix(1700000010, 0))
	got := scrape(t, m)
	checkLines(t, got,
		`signet_watcher_trust_bundle_published_timestamp_seconds{signer="example.com/a"} 1.70000001e+09`,
		`signet_watcher_trust_bundle_anchors{signer="example.com/a",state="active"} 1`,
		`signet_watcher_trust_bundle_anchors{signer="example.com/a",state="staged"} 1`,
		`signet_watcher_trust_bundle_anchors{signer="example.com/a",state="retired"} 2`,
		`signet_watcher_trust_bundle_anchors{signer="example.com/a",state="unknown"} 0`,
		`signet_watcher_trust_bundle_info{hash="2222",signer="example.com/a"} 1`,
		`signet_watcher_trust_bundle_reports_total{outcome="reported",signer="example.com/b"} 0`,
	)
	for _, absent := range []string{`hash="1111"`, `state="bogus"`, `trust_bundle_anchors{signer="example.com/b"`,
		`trust_bundle_info{hash="2222",signer="example.com/b"}`, "trust_bundle_publish_error_timestamp_seconds{"} {
		if strings.Contains(got, absent) {
			t.Errorf("/metrics holds %s:\n%s", absent, got)
		}
	}

	// Back to the first bundle, then a failure: the timestamp of the last one per reason.
	bundles.ObservePublished("example.com/a", "1111", map[string]int{TrustBundleActive: 1}, time.Unix(1700000020, 0))
	bundles.ObserveError("example.com/b", "APIError", time.Unix(1700000030, 0))
	bundles.ObserveError("example.com/b", "APIError", time.Unix(1700000040, 0))
	got = scrape(t, m)
	checkLines(t, got,
		`signet_watcher_trust_bundle_info{hash="1111",signer="example.com/a"} 1`,
		`signet_watcher_trust_bundle_anchors{signer="example.com/a",state="staged"} 0`,
		`signet_watcher_trust_bundle_publish_errors_total{reason="APIError",signer="example.com/b"} 2`,
		`signet_watcher_trust_bundle_publish_error_timestamp_seconds{reason="APIError",signer="example.com/b"} 1.70000004e+09`,
	)
	if strings.Contains(got, `hash="2222"`) {
		t.Errorf("the replaced hash's info series is still there:\n%s", got)
	}
}

package metrics

import (
	"crypto/x509"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/signet-pki/signet/internal/metricstest"
)

const (
	serving = "example.com/serving"
	client  = "example.com/client"
)

func newTest(t *testing.T) *Metrics {
	t.Helper()
	return New("v1.2.3", "abc1234", []string{serving, client})
}

// The helpers below do what prometheus/testutil does (ToFloat64, CollectAndCount,
// GatherAndLint): testutil imports github.com/kylelemons/godebug, which this module does not
// require.

// collect returns every series c collects.
func collect(t *testing.T, c prometheus.Collector) []*dto.Metric {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	var out []*dto.Metric
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, &d)
	}
	return out
}

// count is the number of series c collects.
func count(t *testing.T, c prometheus.Collector) int {
	t.Helper()
	return len(collect(t, c))
}

// value is the value of the one counter or gauge series c collects.
func value(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ms := collect(t, c)
	if len(ms) != 1 {
		t.Fatalf("collected %d series, want 1", len(ms))
	}
	switch m := ms[0]; {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("series %v is neither a counter nor a gauge", ms[0])
	return 0
}

// histogram returns the one series of a histogram.
func histogram(t *testing.T, h prometheus.Observer) *dto.Histogram {
	t.Helper()
	ms := collect(t, h.(prometheus.Collector))
	if len(ms) != 1 || ms[0].Histogram == nil {
		t.Fatalf("collected %v, want one histogram", ms)
	}
	return ms[0].GetHistogram()
}

// gather returns the series of the metric family name in g, with their labels as name=value.
func gather(t *testing.T, g prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(labels, ",")] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

func TestObserveRequest(t *testing.T) {
	m := newTest(t)
	m.ObserveRequest(serving, OutcomeIssued, 2*time.Millisecond)
	m.ObserveRequest(serving, OutcomeIssued, 300*time.Millisecond)
	m.ObserveRequest(serving, OutcomeRefused, time.Second)
	m.ObserveRequest("evil.example/never-served", OutcomeRefused, time.Millisecond)

	for _, tt := range []struct {
		signer, outcome string
		want            float64
	}{
		{serving, OutcomeIssued, 2},
		{serving, OutcomeRefused, 1},
		{serving, OutcomeError, 0},
		{client, OutcomeIdempotentReplay, 0},
		{UnknownSigner, OutcomeRefused, 1},
	} {
		if got := value(t, m.requests.WithLabelValues(tt.signer, tt.outcome)); got != tt.want {
			t.Errorf("requests_total{signer=%q,outcome=%q} = %v, want %v", tt.signer, tt.outcome, got, tt.want)
		}
	}
	// Only issued requests feed the signing latency.
	h := histogram(t, m.signDuration.WithLabelValues(serving))
	if h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-0.302) > 1e-9 {
		t.Errorf("sign_duration_seconds{serving}: count %d sum %v, want 2 and 0.302", h.GetSampleCount(), h.GetSampleSum())
	}
	cumulative := map[float64]uint64{0.001: 0, 0.0025: 1, 0.25: 1, 0.5: 2, 2.5: 2}
	for _, b := range h.GetBucket() {
		if want, ok := cumulative[b.GetUpperBound()]; ok && b.GetCumulativeCount() != want {
			t.Errorf("sign_duration_seconds{serving} bucket le=%v = %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if len(h.GetBucket()) != len(latencyBuckets) {
		t.Errorf("sign_duration_seconds has %d buckets, want %d", len(h.GetBucket()), len(latencyBuckets))
	}
	if got := count(t, m.signDuration); got != 3 {
		t.Errorf("sign_duration_seconds has %d series, want 3 (two signers and unknown)", got)
	}
}

func TestObserveIssuance(t *testing.T) {
	m := newTest(t)
	m.ObserveIssuance(serving, 400*time.Microsecond)
	m.ObserveIssuance(serving, 2*time.Millisecond)
	m.ObserveIssuance("evil.example/never-served", time.Millisecond)

	h := histogram(t, m.issuance.WithLabelValues(serving))
	if h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-0.0024) > 1e-9 {
		t.Errorf("issuance_duration_seconds{serving}: count %d sum %v, want 2 and 0.0024", h.GetSampleCount(), h.GetSampleSum())
	}
	cumulative := map[float64]uint64{0.00025: 0, 0.0005: 1, 0.001: 1, 0.0025: 2}
	for _, b := range h.GetBucket() {
		if want, ok := cumulative[b.GetUpperBound()]; ok && b.GetCumulativeCount() != want {
			t.Errorf("issuance_duration_seconds{serving} bucket le=%v = %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if got := histogram(t, m.issuance.WithLabelValues(UnknownSigner)).GetSampleCount(); got != 1 {
		t.Errorf("issuance_duration_seconds{unknown} count %d, want 1 (names not served are not labels)", got)
	}
	if got := count(t, m.issuance); got != 3 {
		t.Errorf("issuance_duration_seconds has %d series, want 3 (two signers and unknown)", got)
	}
}

func TestCountersAndGauges(t *testing.T) {
	m := newTest(t)
	m.ObserveRefusal(serving, "POLICY_VIOLATION")
	m.ObserveRefusal(serving, "POLICY_VIOLATION")
	m.ObserveRefusal("x/y", "UNKNOWN_SIGNER")
	m.ObserveLintFailure(client, "e_sub_cert_aia_missing")
	m.ObserveRateLimited(serving, "client")
	m.ObserveRateLimited(serving, "signer")
	m.ObserveRateLimited(serving, "signer")
	notAfter := time.Date(2035, 6, 1, 12, 0, 0, 0, time.UTC)
	m.SetCAExpiry(serving, notAfter)
	m.SetCAExpiry("x/y", notAfter)
	m.ObserveLedgerAppend(3 * time.Millisecond)
	m.ObserveLedgerAppend(4 * time.Millisecond)

	for _, tt := range []struct {
		name string
		got  float64
		want float64
	}{
		{"refusals_total{serving,POLICY_VIOLATION}", value(t, m.refusals.WithLabelValues(serving, "POLICY_VIOLATION")), 2},
		{"refusals_total{unknown,UNKNOWN_SIGNER}", value(t, m.refusals.WithLabelValues(UnknownSigner, "UNKNOWN_SIGNER")), 1},
		{"lint_failures_total", value(t, m.lintFailures.WithLabelValues(client, "e_sub_cert_aia_missing")), 1},
		{"rate_limited_total{client}", value(t, m.rateLimited.WithLabelValues(serving, "client")), 1},
		{"rate_limited_total{signer}", value(t, m.rateLimited.WithLabelValues(serving, "signer")), 2},
		{"ca_certificate_expiry_timestamp_seconds", value(t, m.caExpiry.WithLabelValues(serving)), float64(notAfter.Unix())},
		{"ledger_records_total", value(t, m.ledgerRecords), 2},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if n := count(t, m.caExpiry); n != 1 {
		t.Errorf("ca_certificate_expiry_timestamp_seconds has %d series, want 1 (unserved signers ignored)", n)
	}
	if h := histogram(t, m.ledgerAppend); h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-0.007) > 1e-9 {
		t.Errorf("ledger_append_duration_seconds: count %d sum %v, want 2 and 0.007", h.GetSampleCount(), h.GetSampleSum())
	}
	info := gather(t, m.Registry(), "signet_server_build_info")
	if want := "commit=abc1234,go_version=" + runtime.Version() + ",version=v1.2.3"; len(info) != 1 || info[want] != 1 {
		t.Errorf("signet_server_build_info = %v, want {%s: 1}", info, want)
	}
}

func TestUnservedSignersAreUnknown(t *testing.T) {
	m := New("v1.2.3", "abc1234", []string{serving})
	if n, want := count(t, m.requests), 2*len(Outcomes); n != want {
		t.Errorf("requests_total has %d series, want %d (serving and unknown, every outcome)", n, want)
	}
	m.ObserveRequest(client, OutcomeIssued, time.Millisecond)
	if got := value(t, m.requests.WithLabelValues(UnknownSigner, OutcomeIssued)); got != 1 {
		t.Errorf("an unserved signer's request counted under unknown = %v, want 1", got)
	}
}

func TestLint(t *testing.T) {
	m := newTest(t)
	m.ObserveRequest(serving, OutcomeIssued, time.Millisecond)
	m.ObserveRefusal(serving, "POLICY_VIOLATION")
	m.ObserveLintFailure(serving, "e_ext_san_missing")
	m.ObserveRateLimited(serving, "signer")
	m.SetCAExpiry(serving, time.Now())
	m.ObserveLedgerAppend(time.Millisecond)
	checkLint(t, m)
}

// TestNilMetricsRecordsNothing: every exported method of *Metrics, found by reflection so
// that a new one is covered without editing this test, can be called on a nil *Metrics
// without panicking; and each call, made on a new *Metrics with the same arguments, shows in
// its registry, so that the nil receiver's silence is a choice and not a call that records
// nothing anyway. Only the methods in notRecording are left out, each for its reason.
func TestNilMetricsRecordsNothing(t *testing.T) {
	typ := reflect.TypeFor[*Metrics]()
	for name := range notRecording {
		if _, ok := typ.MethodByName(name); !ok {
			t.Errorf("notRecording names %s, which *Metrics no longer has", name)
		}
	}
	for i := range typ.NumMethod() {
		method := typ.Method(i)
		if _, ok := notRecording[method.Name]; ok {
			continue
		}
		t.Run(method.Name, func(t *testing.T) {
			args := metricstest.Args(t, method.Name, method, representative, representativeOverrides)
			checkNilRecordsNothing(t, method.Name, func(m *Metrics) {
				reflect.ValueOf(m).MethodByName(method.Name).Call(args)
			})
		})
	}
}

// notRecording are the methods of *Metrics that record nothing, so the nil contract does not
// cover them: they hand out the registry, which exists only in a *Metrics made by New.
var notRecording = map[string]string{
	"Registry": "returns the registry, for collectors added later",
	"Handler":  "serves the registry",
}

// representative holds, by type, the argument TestNilMetricsRecordsNothing passes to a method:
// a value that records (every string is a served signer: unserved ones are ignored by some).
var representative = map[reflect.Type]any{
	reflect.TypeFor[string]():         serving,
	reflect.TypeFor[bool]():           true,
	reflect.TypeFor[int]():            503,
	reflect.TypeFor[int64]():          int64(42),
	reflect.TypeFor[uint64]():         uint64(42),
	reflect.TypeFor[uint32]():         uint32(3),
	reflect.TypeFor[time.Duration]():  3 * time.Millisecond,
	reflect.TypeFor[time.Time]():      time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
	reflect.TypeFor[map[string]int](): map[string]int{"active": 2},
	reflect.TypeFor[[]string]():       []string{"/signet.v1.SignerService/GetServerInfo"},
	reflect.TypeFor[func() *x509.Certificate](): func() *x509.Certificate {
		return &x509.Certificate{NotAfter: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	},
}

// representativeOverrides are the arguments of the methods whose parameters' representative
// values would record nothing new on a new *Metrics (the state it starts in).
var representativeOverrides = map[string][]any{
	"SetLedgerState": {LedgerUnavailable}, // New sets LedgerOK
}

// checkNilRecordsNothing calls record on a nil *Metrics and fails the test, naming what, if it
// panics; then calls it on a new *Metrics and fails unless the scrape of the signet_server_
// series differs after the call.
func checkNilRecordsNothing(t *testing.T, what string, record func(*Metrics)) {
	t.Helper()
	metricstest.NilRecordsNothing(t, what, record, func() (*Metrics, prometheus.Gatherer) {
		m := newTest(t)
		return m, m.Registry()
	}, namespace+"_"+subsystem+"_")
}

func TestHandler(t *testing.T) {
	m := newTest(t)
	m.ObserveRequest(serving, OutcomeIssued, time.Millisecond)
	_ = m.Handler() // a second handler on the same registry must not panic
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, want := range []string{
		`signet_server_requests_total{outcome="issued",signer="example.com/serving"} 1`,
		`signet_server_requests_total{outcome="rate_limited",signer="example.com/client"} 0`,
		"signet_server_build_info{",
		"signet_server_ledger_records_total 0",
		"go_goroutines ",
		"process_start_time_seconds ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

// checkLint gathers m's registry and fails the test for every promlint problem.
func checkLint(t *testing.T, m *Metrics) {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

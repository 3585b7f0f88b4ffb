package trustbundle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"crypto/x509"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/metrics"
)

const signer = "example.com/serving"

// fakeAnchors answers TrustAnchorSet from a map of PEM and one of descriptions, or with err.
type fakeAnchors struct {
	mu        sync.Mutex
	anchors   map[string]string
	described map[string][]signerclient.Anchor
	err       error
}

func (f *fakeAnchors) TrustAnchorSet(_ context.Context, name string) (signerclient.Anchors, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return signerclient.Anchors{}, f.err
	}
	return signerclient.Anchors{PEM: []byte(f.anchors[name]), Anchors: f.described[name]}, nil
}

func (f *fakeAnchors) set(name, pem string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.anchors[name], f.err = pem, err
}

func (f *fakeAnchors) describe(name string, anchors ...signerclient.Anchor) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.described == nil {
		f.described = map[string][]signerclient.Anchor{}
	}
	f.described[name] = anchors
}

// fakeMetrics records what the publisher observes.
type fakeMetrics struct {
	mu        sync.Mutex
	published map[string]int            // signer → anchors
	states    map[string]map[string]int // signer → state → anchors
	hashes    map[string]string         // signer → hash
	writes    []string                  // "signer operation"
	errors    []string                  // "signer reason"
	reports   []string                  // "signer outcome"
}

func (m *fakeMetrics) ObservePublished(signer, hash string, states map[string]int, _ time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.published == nil {
		m.published, m.states, m.hashes = map[string]int{}, map[string]map[string]int{}, map[string]string{}
	}
	n := 0
	for _, c := range states {
		n += c
	}
	m.published[signer], m.states[signer], m.hashes[signer] = n, states, hash
}

func (m *fakeMetrics) ObserveReport(signer, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reports = append(m.reports, signer+" "+outcome)
}

func (m *fakeMetrics) ObserveWrite(signer, operation string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes = append(m.writes, signer+" "+operation)
}

func (m *fakeMetrics) ObserveError(signer, reason string, _ time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errors = append(m.errors, signer+" "+reason)
}

// fixture is a publisher of signer over a fake clientset.
type fixture struct {
	kube     *fake.Clientset
	anchors  *fakeAnchors
	metrics  *fakeMetrics
	reporter *fakeReporter
	recorder *record.FakeRecorder
	pub      *Publisher
	ctx      context.Context
	caPEM    string // the signer's normalized anchors
}

func newFixture(t *testing.T, version APIVersion, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ca := testpki.CA(t)
	f := &fixture{
		kube:     fake.NewClientset(objs...),
		anchors:  &fakeAnchors{anchors: map[string]string{signer: string(ca.CertPEM())}},
		metrics:  &fakeMetrics{},
		reporter: &fakeReporter{},
		recorder: record.NewFakeRecorder(100),
		ctx:      ctx,
		caPEM:    string(ca.CertPEM()),
	}
	var err error
	f.pub, err = New(f.kube, f.anchors, Options{Version: version, SignerNames: []string{signer}, Period: time.Second,
		Recorder: f.recorder, Metrics: f.metrics, Reporter: f.reporter, ClusterName: testCluster})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// writes returns the create and update actions on ClusterTrustBundles so far.
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if a.GetResource().Resource == resource && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			out = append(out, a.GetVerb()+" "+a.GetResource().Version)
		}
	}
	return out
}

// events drains the recorder: "Type Reason Message" each.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) get(t *testing.T) *certificatesv1.ClusterTrustBundle {
	t.Helper()
	b, err := f.kube.CertificatesV1().ClusterTrustBundles().Get(f.ctx, Name(signer), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPublishCreatesThenConfirms: a missing bundle is created with the anchors and labels; a
// second pass finds it up to date and writes nothing.
func TestPublishCreatesThenConfirms(t *testing.T) {
	f := newFixture(t, V1)
	f.pub.PublishAll(f.ctx)
	b := f.get(t)
	if b.Spec.SignerName != signer || b.Spec.TrustBundle != f.caPEM {
		t.Errorf("bundle spec = %+v, want signer %s and its CA", b.Spec, signer)
	}
	if b.Labels[ManagedByLabel] != ManagedBy || b.Labels[SignerLabel] != "example.com_serving" {
		t.Errorf("bundle labels = %v", b.Labels)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal "+EventCreated+" Published 1 trust anchor") {
		t.Errorf("events = %q, want one Normal %s", ev, EventCreated)
	}
	for range 3 {
		f.pub.PublishAll(f.ctx)
	}
	if w := f.writes(); len(w) != 1 || w[0] != "create v1" {
		t.Errorf("writes = %v, want a single create (nothing while up to date)", w)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events while up to date = %q, want none", ev)
	}
	if f.metrics.published[signer] != 1 || len(f.metrics.writes) != 1 || len(f.metrics.errors) != 0 {
		t.Errorf("metrics = %+v, want 1 anchor published, one write, no error", f.metrics)
	}
}

// TestPublishRepairsDrift: an edited trustBundle, a removed signer label and a changed set of
// anchors are each rewritten with one update; other labels and annotations stay.
func TestPublishRepairsDrift(t *testing.T) {
	f := newFixture(t, V1)
	f.pub.PublishAll(f.ctx)
	f.events()
	other := testpki.CA(t)
	edits := map[string]func(b *certificatesv1.ClusterTrustBundle){
		"trustBundle edited": func(b *certificatesv1.ClusterTrustBundle) { b.Spec.TrustBundle = string(other.CertPEM()) },
		"signer label removed": func(b *certificatesv1.ClusterTrustBundle) {
			delete(b.Labels, SignerLabel)
			b.Labels["team"] = "pki"
			b.Annotations = map[string]string{"note": "kept"}
		},
	}
	for name, edit := range edits {
		b := f.get(t)
		edit(b)
		if _, err := f.kube.CertificatesV1().ClusterTrustBundles().Update(f.ctx, b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.kube.ClearActions()
		f.pub.PublishAll(f.ctx)
		got := f.get(t)
		if got.Spec.TrustBundle != f.caPEM || got.Labels[SignerLabel] != "example.com_serving" {
			t.Errorf("%s: not repaired: %+v", name, got)
		}
		if w := f.writes(); len(w) != 1 || w[0] != "update v1" {
			t.Errorf("%s: writes = %v, want one update", name, w)
		}
		if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal "+EventUpdated) {
			t.Errorf("%s: events = %q, want one Normal %s", name, ev, EventUpdated)
		}
	}
	if got := f.get(t); got.Labels["team"] != "pki" || got.Annotations["note"] != "kept" {
		t.Errorf("foreign labels or annotations lost: %v %v", got.Labels, got.Annotations)
	}

	// The server adds an anchor: both, sorted, in one update.
	f.anchors.set(signer, f.caPEM+string(other.CertPEM()), nil)
	f.kube.ClearActions()
	f.pub.PublishAll(f.ctx)
	want, n, err := Normalize([]byte(f.caPEM + string(other.CertPEM())))
	if err != nil || n != 2 {
		t.Fatal(n, err)
	}
	if got := f.get(t); got.Spec.TrustBundle != want {
		t.Errorf("after a new anchor: bundle = %q, want both anchors", got.Spec.TrustBundle)
	}
	if f.metrics.published[signer] != 2 {
		t.Errorf("anchors metric = %d, want 2", f.metrics.published[signer])
	}
}

// TestPublishLeavesForeignBundles: a bundle of the publisher's name without its label is never
// written; the failure is counted every pass and an Event recorded once.
func TestPublishLeavesForeignBundles(t *testing.T) {
	foreign := &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: Name(signer), Labels: map[string]string{"owner": "someone-else"}},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: "theirs"},
	}
	f := newFixture(t, V1, foreign)
	f.pub.PublishAll(f.ctx)
	f.pub.PublishAll(f.ctx)
	if w := f.writes(); len(w) != 0 {
		t.Errorf("writes = %v, want none", w)
	}
	if got := f.get(t); got.Spec.TrustBundle != "theirs" {
		t.Errorf("foreign bundle changed: %+v", got.Spec)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+ReasonNotOwned) {
		t.Errorf("events = %q, want one Warning %s", ev, ReasonNotOwned)
	}
	if e := f.metrics.errors; len(e) != 2 || e[0] != signer+" "+ReasonNotOwned {
		t.Errorf("errors = %v, want NotOwned twice", e)
	}
}

// TestPublishForbidden: the API server refusing (no `attest`) is counted every pass, an Event
// recorded when it starts, and publishing resumes once allowed.
func TestPublishForbidden(t *testing.T) {
	f := newFixture(t, V1)
	var forbid atomic.Bool
	forbid.Store(true)
	f.kube.PrependReactor("create", resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !forbid.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "certificates.k8s.io", Resource: resource}, Name(signer),
			errors.New(`user not permitted to attest for signerName "`+signer+`"`))
	})
	for range 3 {
		f.pub.PublishAll(f.ctx)
	}
	if e := f.metrics.errors; len(e) != 3 || e[2] != signer+" "+ReasonForbidden {
		t.Errorf("errors = %v, want Forbidden three times", e)
	}
	ev := f.events()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning Forbidden") || !strings.Contains(ev[0], "attest") {
		t.Errorf("events = %q, want one Warning Forbidden naming attest", ev)
	}
	if len(f.metrics.published) != 0 {
		t.Errorf("published = %v while forbidden", f.metrics.published)
	}
	forbid.Store(false)
	f.pub.PublishAll(f.ctx)
	if f.get(t).Spec.TrustBundle != f.caPEM || f.metrics.published[signer] != 1 {
		t.Error("not published once allowed")
	}
}

// TestPublishAnchorFailures: an unreachable server or anchors a bundle cannot hold leave the
// bundle as it is.
func TestPublishAnchorFailures(t *testing.T) {
	f := newFixture(t, V1)
	f.pub.PublishAll(f.ctx)
	f.kube.ClearActions()
	f.anchors.set(signer, "", errors.New("rpc error: code = Unavailable"))
	f.pub.PublishAll(f.ctx)
	leaf := testpki.CA(t).Sign(t, &x509.Certificate{}, testpki.Key(t, testpki.P256).Public())
	f.anchors.set(signer, string(testpki.CertPEM(leaf)), nil)
	f.pub.PublishAll(f.ctx)
	f.anchors.set(signer, "", nil)
	f.pub.PublishAll(f.ctx)
	want := []string{signer + " " + ReasonAnchorsUnavailable, signer + " " + ReasonInvalidAnchors, signer + " " + ReasonInvalidAnchors}
	if fmt.Sprint(f.metrics.errors) != fmt.Sprint(want) {
		t.Errorf("errors = %v, want %v", f.metrics.errors, want)
	}
	if len(f.kube.Actions()) != 0 || f.get(t).Spec.TrustBundle != f.caPEM {
		t.Errorf("bundle touched after anchor failures: %v", f.kube.Actions())
	}
}

// TestPublishRetriesConflict: an update that conflicts is retried at once with a fresh read.
func TestPublishRetriesConflict(t *testing.T) {
	f := newFixture(t, V1)
	f.pub.PublishAll(f.ctx)
	b := f.get(t)
	b.Spec.TrustBundle = string(testpki.CA(t).CertPEM())
	if _, err := f.kube.CertificatesV1().ClusterTrustBundles().Update(f.ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var conflicts atomic.Int32
	f.kube.PrependReactor("update", resource, func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts.Add(1) > 1 {
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: resource}, Name(signer), errors.New("changed"))
	})
	f.pub.PublishAll(f.ctx)
	if f.get(t).Spec.TrustBundle != f.caPEM || len(f.metrics.errors) != 0 {
		t.Errorf("conflict not retried: errors %v", f.metrics.errors)
	}
}

// TestPublishV1beta1 writes the v1beta1 API when that is the one served.
func TestPublishV1beta1(t *testing.T) {
	f := newFixture(t, V1beta1)
	f.pub.PublishAll(f.ctx)
	b, err := f.kube.CertificatesV1beta1().ClusterTrustBundles().Get(f.ctx, Name(signer), metav1.GetOptions{})
	if err != nil || b.Spec.TrustBundle != f.caPEM || b.Labels[ManagedByLabel] != ManagedBy {
		t.Fatalf("v1beta1 bundle = %+v, %v", b, err)
	}
	b.Spec.TrustBundle = "edited"
	if _, err := f.kube.CertificatesV1beta1().ClusterTrustBundles().Update(f.ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.kube.ClearActions()
	f.pub.PublishAll(f.ctx)
	if w := f.writes(); fmt.Sprint(w) != "[update v1beta1]" {
		t.Errorf("writes = %v, want a v1beta1 update", w)
	}
	if _, err := f.kube.CertificatesV1().ClusterTrustBundles().Get(f.ctx, Name(signer), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a v1 bundle exists too: %v", err)
	}
}

// TestRunEveryPeriod: Run publishes at once, then each period, and returns nil when stopped.
func TestRunEveryPeriod(t *testing.T) {
	f := newFixture(t, V1)
	clk := clocktesting.NewFakeClock(time.Now())
	f.pub.clock = clk
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- f.pub.Run(ctx) }()
	for pass := range 3 {
		waitFor(t, func() bool { return clk.HasWaiters() })
		if pass == 1 {
			if err := f.kube.CertificatesV1().ClusterTrustBundles().Delete(f.ctx, Name(signer), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		clk.Step(time.Second)
	}
	waitFor(t, func() bool { return clk.HasWaiters() })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	if w := f.writes(); fmt.Sprint(w) != "[create v1 create v1]" {
		t.Errorf("writes = %v, want a create, and another after the deletion", w)
	}
}

func TestNewErrors(t *testing.T) {
	kube := fake.NewClientset()
	for name, opts := range map[string]Options{
		"no signers": {Version: V1, Period: time.Second},
		"no period":  {Version: V1, SignerNames: []string{signer}},
		"not served": {Version: NotServed, SignerNames: []string{signer}, Period: time.Second},
		"v1alpha1":   {Version: "v1alpha1", SignerNames: []string{signer}, Period: time.Second},
		"reports without a cluster name": {Version: V1, SignerNames: []string{signer}, Period: time.Second,
			Reporter: &fakeReporter{}},
	} {
		if _, err := New(kube, &fakeAnchors{}, opts); err == nil {
			t.Errorf("%s: New accepted %+v", name, opts)
		}
	}
}

// TestMetricsNames: the operations and reasons are those watcher/metrics pre-creates.
func TestMetricsNames(t *testing.T) {
	if OperationCreated != metrics.TrustBundleCreated || OperationUpdated != metrics.TrustBundleUpdated {
		t.Error("operation names differ from watcher/metrics")
	}
	if fmt.Sprint(States()) != fmt.Sprint(metrics.TrustBundleStates()) {
		t.Errorf("States() = %v, watcher/metrics has %v", States(), metrics.TrustBundleStates())
	}
	if fmt.Sprint(ReportOutcomes()) != fmt.Sprint(metrics.TrustBundleReportOutcomes()) {
		t.Errorf("ReportOutcomes() = %v, watcher/metrics has %v", ReportOutcomes(), metrics.TrustBundleReportOutcomes())
	}
	var _ Metrics = (*metrics.TrustBundleMetrics)(nil)
}

func TestDiscover(t *testing.T) {
	ctbs := []metav1.APIResource{{Name: "clustertrustbundles"}}
	for name, tt := range map[string]struct {
		resources []*metav1.APIResourceList
		want      APIVersion
	}{
		"v1":           {[]*metav1.APIResourceList{{GroupVersion: "certificates.k8s.io/v1", APIResources: ctbs}, {GroupVersion: "certificates.k8s.io/v1beta1", APIResources: ctbs}}, V1},
		"v1beta1 only": {[]*metav1.APIResourceList{{GroupVersion: "certificates.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "certificatesigningrequests"}}}, {GroupVersion: "certificates.k8s.io/v1beta1", APIResources: ctbs}}, V1beta1},
		"none":         {[]*metav1.APIResourceList{{GroupVersion: "certificates.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "certificatesigningrequests"}}}}, NotServed},
	} {
		kube := fake.NewClientset()
		kube.Resources = tt.resources
		got, err := Discover(context.Background(), kube.Discovery())
		if err != nil || got != tt.want {
			t.Errorf("%s: Discover() = %q, %v; want %q", name, got, err, tt.want)
		}
	}
	kube := fake.NewClientset()
	kube.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := Discover(context.Background(), kube.Discovery()); err == nil {
		t.Error("Discover hid a discovery error")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

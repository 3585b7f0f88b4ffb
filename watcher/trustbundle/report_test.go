package trustbundle

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/signerclient"
)

// testCluster is the cluster name of the fixture's reports.
const testCluster = "test-cluster"

// sentReport is one ReportTrustBundle call.
type sentReport struct {
	signer, cluster, hash string
	fingerprints          []string
}

// fakeReporter records reports and answers with err.
type fakeReporter struct {
	mu   sync.Mutex
	sent []sentReport
	err  error
}

func (r *fakeReporter) ReportTrustBundle(_ context.Context, signerName, cluster, bundleHash string, fingerprints []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, sentReport{signerName, cluster, bundleHash, slices.Clone(fingerprints)})
	return r.err
}

func (r *fakeReporter) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// take returns the reports so far and forgets them.
func (r *fakeReporter) take() []sentReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	sent := r.sent
	r.sent = nil
	return sent
}

// fingerprintOf parses the certificates of pemData and returns the hex SHA-256 of each one's
// DER, in order: computed apart from Digest.
func fingerprintOf(t *testing.T, pemData string) []string {
	t.Helper()
	var out []string
	for rest := []byte(pemData); ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return out
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(cert.Raw)
		out = append(out, hex.EncodeToString(sum[:]))
	}
}

// wantReport is the report of the bundle as it stands in the fake cluster.
func (f *fixture) wantReport(t *testing.T) sentReport {
	t.Helper()
	published := f.get(t).Spec.TrustBundle
	sum := sha256.Sum256([]byte(published))
	return sentReport{signer, testCluster, hex.EncodeToString(sum[:]), fingerprintOf(t, published)}
}

// refusal is a gRPC error as the server sends it, with an ErrorInfo reason.
func refusal(t *testing.T, code codes.Code, reason signetv1.ErrorReason, msg string) error {
	t.Helper()
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Domain: signetv1.ErrorDomain, Reason: signetv1.ReasonName(reason)})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Errorf("reporting the trust bundle: %w", st.Err())
}

// TestReportEveryPass: the bundle is reported after it is created, found up to date and
// updated, each time with the hash and fingerprints of the bundle in the cluster.
func TestReportEveryPass(t *testing.T) {
	f := newFixture(t, V1)
	f.pub.PublishAll(f.ctx) // created
	created := f.wantReport(t)
	f.pub.PublishAll(f.ctx) // up to date
	other := testpki.CA(t)
	f.anchors.set(signer, f.caPEM+string(other.CertPEM()), nil)
	f.pub.PublishAll(f.ctx) // updated
	updated := f.wantReport(t)
	got := f.reporter.take()
	want := []sentReport{created, created, updated}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reports =\n%v\nwant\n%v", got, want)
	}
	if len(updated.fingerprints) != 2 || updated.hash == created.hash {
		t.Errorf("the updated bundle's report = %+v, want two anchors and a new hash", updated)
	}
	if f.metrics.hashes[signer] != updated.hash {
		t.Errorf("hash metric = %s, want the reported %s", f.metrics.hashes[signer], updated.hash)
	}
	if r := f.metrics.reports; fmt.Sprint(r) != fmt.Sprint([]string{signer + " reported", signer + " reported", signer + " reported"}) {
		t.Errorf("report metrics = %v, want three reported", r)
	}
	if ev := f.events(); len(ev) != 2 {
		t.Errorf("events = %q, want the create and the update only", ev)
	}
}

// TestReportFailures: a refused or failed report is counted, logged and reported as a Warning
// Event when its reason changes, and never stops publishing; a success ends it quietly.
func TestReportFailures(t *testing.T) {
	f := newFixture(t, V1)
	f.reporter.fail(refusal(t, codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_ROTATION_REFUSED,
		`cluster "test-cluster" is not among the clusters of signer example.com/serving`))
	f.pub.PublishAll(f.ctx)
	f.pub.PublishAll(f.ctx)
	ev := f.events()
	if len(ev) != 2 || !strings.HasPrefix(ev[0], "Normal "+EventCreated) || !strings.HasPrefix(ev[1], "Warning "+EventReportRefused) ||
		!strings.Contains(ev[1], "RotationRefused") || !strings.Contains(ev[1], "not among the clusters") {
		t.Errorf("events = %q, want the create, then one Warning %s naming the reason", ev, EventReportRefused)
	}

	// The anchors change while reports fail: the bundle is still updated.
	other := testpki.CA(t)
	f.anchors.set(signer, f.caPEM+string(other.CertPEM()), nil)
	f.pub.PublishAll(f.ctx)
	if got := f.get(t).Spec.TrustBundle; len(fingerprintOf(t, got)) != 2 {
		t.Errorf("bundle not updated while reports fail: %q", got)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal "+EventUpdated) {
		t.Errorf("events = %q, want the update alone (same report failure)", ev)
	}

	// Another reason: one more Warning Event; then the server takes the report.
	f.reporter.fail(fmt.Errorf("reporting: %w", status.Error(codes.Unavailable, "no healthy endpoint")))
	f.pub.PublishAll(f.ctx)
	f.pub.PublishAll(f.ctx)
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+EventReportFailed) || !strings.Contains(ev[0], "Unavailable") {
		t.Errorf("events = %q, want one Warning %s", ev, EventReportFailed)
	}
	f.reporter.fail(nil)
	f.pub.PublishAll(f.ctx)
	f.pub.PublishAll(f.ctx)
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events after recovery = %q, want none", ev)
	}
	want := []string{"refused", "refused", "refused", "failed", "failed", "reported", "reported"}
	for i := range want {
		want[i] = signer + " " + want[i]
	}
	if fmt.Sprint(f.metrics.reports) != fmt.Sprint(want) {
		t.Errorf("report metrics = %v, want %v", f.metrics.reports, want)
	}
	if len(f.metrics.errors) != 0 || len(f.pub.reports.failing) != 0 {
		t.Errorf("publish errors %v, failing reports %v; want none", f.metrics.errors, f.pub.reports.failing)
	}
	if sent := f.reporter.take(); len(sent) != 7 || sent[6].hash != f.wantReport(t).hash {
		t.Errorf("reports = %v, want 7, the last of the bundle as it stands", sent)
	}
}

// TestReportUnsupported: an older server's Unimplemented pauses every signer's reports for
// UnsupportedRetry, without an Event; publishing goes on; reports resume afterwards.
func TestReportUnsupported(t *testing.T) {
	const second = "example.com/second"
	f := newFixture(t, V1)
	clk := clocktesting.NewFakeClock(time.Now())
	f.pub.clock = clk
	f.pub.signers = append(f.pub.signers, second)
	f.anchors.set(second, f.caPEM, nil)
	f.reporter.fail(fmt.Errorf("reporting: %w", status.Error(codes.Unimplemented, "unknown method ReportTrustBundle")))
	for range 3 {
		f.pub.PublishAll(f.ctx)
		clk.Step(time.Second)
	}
	if sent := f.reporter.take(); len(sent) != 1 || sent[0].signer != signer {
		t.Errorf("reports = %v, want one (the first signer's), then none", sent)
	}
	if r := f.metrics.reports; fmt.Sprint(r) != fmt.Sprint([]string{signer + " unsupported"}) {
		t.Errorf("report metrics = %v, want one unsupported", r)
	}
	for _, e := range f.events() {
		if strings.HasPrefix(e, "Warning") {
			t.Errorf("a Warning Event for an older server: %q", e)
		}
	}
	if f.metrics.published[second] != 1 {
		t.Error("the second signer's bundle was not published while reports pause")
	}

	clk.Step(UnsupportedRetry)
	f.pub.PublishAll(f.ctx)
	if sent := f.reporter.take(); len(sent) != 1 {
		t.Errorf("reports after UnsupportedRetry = %v, want one probe", sent)
	}
	clk.Step(UnsupportedRetry)
	f.reporter.fail(nil)
	f.pub.PublishAll(f.ctx)
	if sent := f.reporter.take(); len(sent) != 2 || f.pub.reports.unsupported {
		t.Errorf("reports once the server takes them = %v, want both signers'", sent)
	}
}

// TestReportStopping: a report cut short by the publisher stopping is not counted.
func TestReportStopping(t *testing.T) {
	f := newFixture(t, V1)
	ctx, cancel := context.WithCancel(f.ctx)
	f.pub.reporter = reporterFunc(func() error { cancel(); return context.Canceled })
	f.pub.PublishAll(ctx)
	if len(f.metrics.reports) != 0 || len(f.events()) != 1 {
		t.Errorf("report metrics %v: want none, and only the create's Event", f.metrics.reports)
	}
}

// reporterFunc is a Reporter that answers with its result.
type reporterFunc func() error

func (r reporterFunc) ReportTrustBundle(context.Context, string, string, string, []string) error {
	return r()
}

// TestNoReporter: without a Reporter, publishing reports nothing.
func TestNoReporter(t *testing.T) {
	f := newFixture(t, V1)
	f.pub.reporter = nil
	f.pub.PublishAll(f.ctx)
	if f.get(t).Spec.TrustBundle != f.caPEM || len(f.metrics.reports) != 0 {
		t.Errorf("published %v, reports %v; want published, no report", f.metrics.published, f.metrics.reports)
	}
}

// TestAnchorStates: the published anchors are counted by the state the server gives each
// (by fingerprint); one it does not describe, or every one from an older server, is unknown.
func TestAnchorStates(t *testing.T) {
	f := newFixture(t, V1)
	staged, undescribed := testpki.CA(t), testpki.CA(t)
	active := fingerprintOf(t, f.caPEM)[0]
	f.anchors.set(signer, f.caPEM+string(staged.CertPEM())+string(undescribed.CertPEM()), nil)
	f.anchors.describe(signer,
		signerclient.Anchor{Fingerprint: active, State: signerclient.AnchorActive},
		signerclient.Anchor{Fingerprint: fingerprintOf(t, string(staged.CertPEM()))[0], State: signerclient.AnchorStaged},
		signerclient.Anchor{Fingerprint: "00", State: signerclient.AnchorRetired},
	)
	f.pub.PublishAll(f.ctx)
	want := map[string]int{StateActive: 1, StateStaged: 1, StateUnknown: 1}
	if got := f.metrics.states[signer]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("anchors by state = %v, want %v", got, want)
	}
	f.anchors.describe(signer)
	f.pub.PublishAll(f.ctx)
	if got := f.metrics.states[signer]; fmt.Sprint(got) != fmt.Sprint(map[string]int{StateUnknown: 3}) {
		t.Errorf("anchors by state from an older server = %v, want 3 unknown", got)
	}
}

func TestDigest(t *testing.T) {
	a, b := testpki.CA(t), testpki.CA(t)
	content, _, err := Normalize(append(a.CertPEM(), b.CertPEM()...))
	if err != nil {
		t.Fatal(err)
	}
	hash, fps := Digest(content)
	sum := sha256.Sum256([]byte(content))
	if hash != hex.EncodeToString(sum[:]) || fmt.Sprint(fps) != fmt.Sprint(fingerprintOf(t, content)) || len(fps) != 2 {
		t.Errorf("Digest = %s, %v", hash, fps)
	}
	if hash, fps := Digest(""); hash != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" || fps != nil {
		t.Errorf("Digest(\"\") = %s, %v", hash, fps)
	}
}

func TestReportOutcome(t *testing.T) {
	for err, want := range map[error]string{
		nil:                                                        ReportReported,
		status.Error(codes.Unimplemented, ""):                      ReportUnsupported,
		status.Error(codes.NotFound, ""):                           ReportRefused,
		status.Error(codes.PermissionDenied, ""):                   ReportRefused,
		status.Error(codes.InvalidArgument, ""):                    ReportRefused,
		status.Error(codes.FailedPrecondition, ""):                 ReportRefused,
		status.Error(codes.Unavailable, ""):                        ReportFailed,
		status.Error(codes.DeadlineExceeded, ""):                   ReportFailed,
		errors.New("not a status"):                                 ReportFailed,
		fmt.Errorf("x: %w", status.Error(codes.Unimplemented, "")): ReportUnsupported,
	} {
		if got := reportOutcome(err); got != want {
			t.Errorf("reportOutcome(%v) = %s, want %s", err, got, want)
		}
	}
}

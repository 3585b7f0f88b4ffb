package csrsigner

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/watcher/internal/looptest"
)

// approvedAt approves a CSR at t (the Approved condition's lastUpdateTime).
func approvedAt(t time.Time) csrOption {
	return func(csr *certificatesv1.CertificateSigningRequest) {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test",
			LastUpdateTime: metav1.NewTime(t),
		})
	}
}

func createdAt(t time.Time) csrOption {
	return func(csr *certificatesv1.CertificateSigningRequest) { csr.CreationTimestamp = metav1.NewTime(t) }
}

// testLeafChain returns a PEM chain (leaf, CA) whose leaf has serial 0xabc123 and expires at
// notAfter.
func testLeafChain(t *testing.T, notAfter time.Time) []byte {
	ca := testpki.CA(t)
	leaf := ca.Sign(t, &x509.Certificate{
		SerialNumber: big.NewInt(0xabc123), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter,
	}, testpki.Key(t, testpki.P256).Public())
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})
	return append(chain, ca.CertPEM()...)
}

func transientError(t *testing.T, code codes.Code, reason, msg string) error {
	t.Helper()
	st := status.New(code, msg)
	if reason != "" {
		var err error
		if st, err = st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "signet.dev"}); err != nil {
			t.Fatal(err)
		}
	}
	return st.Err()
}

// TestEventsAndMetrics checks the Event, the outcome and the status write of every way a
// sync can end.
func TestEventsAndMetrics(t *testing.T) {
	notAfter := time.Date(2026, 5, 5, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		csr         *certificatesv1.CertificateSigningRequest
		chain       []byte
		serial      string    // reported by the server
		notAfter    time.Time // reported by the server
		signErrs    []error
		giveUpAfter time.Duration
		requeues    int  // failures already counted by the queue
		always      bool // Options.SignedEventAlways
		wantErr     bool
		wantEvent   string
		wantOutcome string
		wantLatency time.Duration
		wantFailed  string // reason of the Failed condition written, if any
	}{
		{name: "signed at the first attempt: no Event by default", csr: newCSR("csr", approvedAt(testNow.Add(-90*time.Second))),
			chain:       testLeafChain(t, notAfter),
			wantOutcome: OutcomeSigned, wantLatency: 90 * time.Second},
		{name: "signed after retries", csr: newCSR("csr", approvedAt(testNow.Add(-90*time.Second))), requeues: 2,
			chain:       testLeafChain(t, notAfter),
			wantEvent:   "Normal Signed certificate issued by example.com/serving, serial abc123, valid until 2026-05-05T12:00:00Z",
			wantOutcome: OutcomeSigned, wantLatency: 90 * time.Second},
		{name: "signed, every certificate gets an Event", csr: newCSR("csr", approvedAt(testNow.Add(-90*time.Second))), always: true,
			chain:       testLeafChain(t, notAfter),
			wantEvent:   "Normal Signed certificate issued by example.com/serving, serial abc123, valid until 2026-05-05T12:00:00Z",
			wantOutcome: OutcomeSigned, wantLatency: 90 * time.Second},
		{name: "signed, approval time from creation", csr: newCSR("csr", approved, createdAt(testNow.Add(-2*time.Minute))), always: true,
			chain:       testLeafChain(t, notAfter),
			wantEvent:   "Normal Signed certificate issued by example.com/serving, serial abc123, valid until 2026-05-05T12:00:00Z",
			wantOutcome: OutcomeSigned, wantLatency: 2 * time.Minute},
		{name: "signed, chain not parsed", csr: newCSR("csr", approved), always: true,
			wantEvent: "Normal Signed certificate issued by example.com/serving", wantOutcome: OutcomeSigned},
		{name: "signed, serial and expiry from the server, chain not parsed", csr: newCSR("csr", approved), always: true,
			serial: "01abc123", notAfter: notAfter.Add(time.Hour),
			wantEvent:   "Normal Signed certificate issued by example.com/serving, serial 01abc123, valid until 2026-05-05T13:00:00Z",
			wantOutcome: OutcomeSigned},
		{name: "terminal refusal", csr: newCSR("csr", approved),
			signErrs:  []error{terminalError(t, "UNSUPPORTED_KEY", "RSA-2048 is below the minimum of 3072 bits")},
			wantEvent: "Warning UnsupportedKey RSA-2048 is below the minimum of 3072 bits", wantOutcome: OutcomeFailed,
			wantFailed: "UnsupportedKey"},
		{name: "server unavailable, first attempt", csr: newCSR("csr", approved),
			signErrs: []error{status.Error(codes.Unavailable, "connection refused")}, wantErr: true,
			wantEvent: "Warning SignerUnavailable connection refused; retrying in 10ms (attempt 1)", wantOutcome: OutcomeRetried},
		{name: "rate limited, third attempt", csr: newCSR("csr", approved), requeues: 2,
			signErrs: []error{transientError(t, codes.ResourceExhausted, "RATE_LIMITED", "too many requests for example.com/serving")}, wantErr: true,
			wantEvent:   "Warning RateLimited too many requests for example.com/serving; retrying in 40ms (attempt 3)",
			wantOutcome: OutcomeRetried},
		{name: "delay capped at back-off max", csr: newCSR("csr", approved), requeues: 9,
			signErrs: []error{transientError(t, codes.Unavailable, "LEDGER_UNAVAILABLE", "ledger is read-only")}, wantErr: true,
			wantEvent: "Warning LedgerUnavailable ledger is read-only; retrying in 100ms (attempt 10)", wantOutcome: OutcomeRetried},
		{name: "transient just before the deadline is retried", csr: newCSR("csr", approvedAt(testNow.Add(-54*time.Minute))),
			signErrs: []error{status.Error(codes.Unavailable, "connection refused")}, wantErr: true,
			wantEvent: "Warning SignerUnavailable connection refused; retrying in 10ms (attempt 1)", wantOutcome: OutcomeRetried},
		{name: "transient past the deadline gives up", csr: newCSR("csr", approvedAt(testNow.Add(-56*time.Minute))),
			signErrs: []error{status.Error(codes.Unavailable, "connection refused")},
			wantEvent: "Warning SigningDeadlineExceeded the signing server did not issue the certificate within 55m0s of approval " +
				"(approved 56m0s ago); last error: SignerUnavailable: connection refused",
			wantOutcome: OutcomeFailed, wantFailed: "SignerUnavailable"},
		{name: "custom deadline", csr: newCSR("csr", approvedAt(testNow.Add(-11*time.Minute))), giveUpAfter: 10 * time.Minute,
			signErrs: []error{status.Error(codes.Unavailable, "connection refused")},
			wantEvent: "Warning SigningDeadlineExceeded the signing server did not issue the certificate within 10m0s of approval " +
				"(approved 11m0s ago); last error: SignerUnavailable: connection refused",
			wantOutcome: OutcomeFailed, wantFailed: "SignerUnavailable"},
		{name: "giving up disabled", csr: newCSR("csr", approvedAt(testNow.Add(-10*time.Hour))), giveUpAfter: -1,
			signErrs: []error{status.Error(codes.Unavailable, "connection refused")}, wantErr: true,
			wantEvent: "Warning SignerUnavailable connection refused; retrying in 10ms (attempt 1)", wantOutcome: OutcomeRetried},
		{name: "terminal past the deadline keeps the server's reason", csr: newCSR("csr", approvedAt(testNow.Add(-2*time.Hour))),
			signErrs:  []error{terminalError(t, "POLICY_VIOLATION", "the signer does not allow example.org")},
			wantEvent: "Warning PolicyViolation the signer does not allow example.org", wantOutcome: OutcomeFailed,
			wantFailed: "PolicyViolation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			metrics := &looptest.Metrics{}
			rec := record.NewFakeRecorder(10)
			signer := &fakeSigner{errs: tt.signErrs, chain: tt.chain, serial: tt.serial, notAfter: tt.notAfter}
			c, kube, ctx := newTestControllerWith(t, signer, func(o *Options) {
				o.Metrics, o.Recorder, o.GiveUpAfter, o.SignedEventAlways = metrics, rec, tt.giveUpAfter, tt.always
			}, tt.csr)
			for range tt.requeues {
				c.loop.Queue().AddRateLimited("csr")
			}

			if err := c.sync(ctx, "csr"); (err != nil) != tt.wantErr {
				t.Fatalf("sync() = %v, want error %v", err, tt.wantErr)
			}
			if got := looptest.Events(rec); tt.wantEvent == "" && len(got) != 0 {
				t.Errorf("events = %q, want none", got)
			} else if tt.wantEvent != "" && (len(got) != 1 || got[0] != tt.wantEvent) {
				t.Errorf("events = %q, want [%q]", got, tt.wantEvent)
			}
			if got := metrics.Outcomes(); len(got) != 1 || got[0] != servedSigner+" "+tt.wantOutcome {
				t.Errorf("outcomes = %v, want [%s %s]", got, servedSigner, tt.wantOutcome)
			}
			if tt.wantOutcome == OutcomeSigned {
				if len(metrics.Latencies()) != 1 || metrics.Latencies()[0] != tt.wantLatency {
					t.Errorf("latencies = %v, want [%s]", metrics.Latencies(), tt.wantLatency)
				}
			} else if len(metrics.Latencies()) != 0 {
				t.Errorf("latency observed without a certificate: %v", metrics.Latencies())
			}
			// A CSR re-queued keeps its sighting; one written is done with.
			if _, ok := seenAt(c, tt.csr.UID); ok != tt.wantErr {
				t.Errorf("sighting recorded after sync: %v, want %v", ok, tt.wantErr)
			}
			updates := statusUpdates(t, kube)
			switch {
			case tt.wantErr && len(updates) > 0:
				t.Errorf("status written on a retry: %+v", updates[0].Status)
			case tt.wantFailed != "":
				conds := updates[len(updates)-1].Status.Conditions
				if last := conds[len(conds)-1]; last.Type != certificatesv1.CertificateFailed || last.Reason != tt.wantFailed ||
					!strings.HasSuffix(tt.wantEvent, last.Message) {
					t.Errorf("last condition = %+v, want Failed %s with the event's message", last, tt.wantFailed)
				}
			}
		})
	}
}

// TestReadOuts checks QueueDepth, HasSynced and OldestPending, the values polled for gauges.
func TestReadOuts(t *testing.T) {
	const secondSigner = "example.com/second"
	objs := []runtime.Object{
		newCSR("approved-10m", approvedAt(testNow.Add(-10*time.Minute))),
		newCSR("approved-3m", approvedAt(testNow.Add(-3*time.Minute))),
		newCSR("created-15m", approved, createdAt(testNow.Add(-15*time.Minute))),
		newCSR("signed-20m", approvedAt(testNow.Add(-20*time.Minute)), withCertificate),
		newCSR("denied-30m", approvedAt(testNow.Add(-30*time.Minute)), withCondition(certificatesv1.CertificateDenied, corev1.ConditionTrue)),
		newCSR("failed-30m", approvedAt(testNow.Add(-30*time.Minute)), withCondition(certificatesv1.CertificateFailed, corev1.ConditionTrue)),
		newCSR("pending", createdAt(testNow.Add(-time.Hour))),
		newCSR("other-40m", approvedAt(testNow.Add(-40*time.Minute)), withSigner(otherSigner)),
	}

	// Before the informers run, nothing has synced.
	unstarted, err := New(fake.NewClientset(), &fakeSigner{}, Options{
		SignerNames: []string{servedSigner}, BackoffInitial: time.Millisecond, BackoffMax: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if unstarted.HasSynced() {
		t.Error("HasSynced() before Run = true")
	}

	c, _, _ := newTestControllerWith(t, &fakeSigner{}, func(o *Options) {
		o.SignerNames = []string{servedSigner, secondSigner}
		o.Clock = clocktesting.NewFakePassiveClock(testNow)
	}, objs...)
	if !c.HasSynced() {
		t.Error("HasSynced() after the caches synced = false")
	}
	want := map[string]time.Duration{servedSigner: 15 * time.Minute, secondSigner: 0}
	got := c.OldestPending()
	if len(got) != len(want) || got[servedSigner] != want[servedSigner] || got[secondSigner] != 0 {
		t.Errorf("OldestPending() = %v, want %v", got, want)
	}

	// The informers queued every cached CSR; drain them, then count.
	for c.loop.Queue().Len() > 0 {
		key, _ := c.loop.Queue().Get()
		c.loop.Queue().Done(key)
	}
	c.loop.Queue().Add("a")
	c.loop.Queue().Add("b")
	c.loop.Queue().Add("a")
	if got := c.QueueDepth(); got != 2 {
		t.Errorf("QueueDepth() = %d, want 2", got)
	}
}

// TestIssuanceLatency checks when the issuance latency starts, with a fake clock: at the
// first delivery of the CSR approved (wants) if that was at most a second after the Approved
// condition's whole-second time, else at the condition's time. The CSR is approved at
// cond, a whole second, as the API server stores it.
func TestIssuanceLatency(t *testing.T) {
	cond := testNow
	ms := time.Millisecond
	tests := []struct {
		name    string
		csr     *certificatesv1.CertificateSigningRequest // nil: approved at cond
		seen    []time.Duration                           // offsets from cond of the deliveries; none: no record
		written time.Duration                             // offset from cond of the status write
		want    time.Duration
	}{
		{name: "seen promptly: from the sighting, sub-second", seen: []time.Duration{720 * ms}, written: 750 * ms, want: 30 * ms},
		{name: "seen a second after the condition: still prompt", seen: []time.Duration{time.Second}, written: time.Second + 30*ms, want: 30 * ms},
		{name: "seen just over a second after: late, from the condition", seen: []time.Duration{time.Second + ms}, written: time.Second + 31*ms,
			want: time.Second + 31*ms},
		{name: "seen minutes later (a restart): from the condition", seen: []time.Duration{5 * time.Minute}, written: 5*time.Minute + 30*ms,
			want: 5*time.Minute + 30*ms},
		{name: "no record: from the condition", written: 750 * ms, want: 750 * ms},
		{name: "watcher clock behind the API server's: from the sighting", seen: []time.Duration{-200 * ms}, written: -170 * ms, want: 30 * ms},
		{name: "later deliveries keep the first sighting", seen: []time.Duration{100 * ms, 500 * ms}, written: 530 * ms, want: 430 * ms},
		{name: "approval from creation", csr: newCSR("csr", approved, createdAt(cond)), seen: []time.Duration{400 * ms}, written: 450 * ms,
			want: 50 * ms},
		{name: "no time on the object: 0", csr: newCSR("csr", approved), seen: []time.Duration{400 * ms}, written: 450 * ms, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(cond)
			c, err := New(fake.NewClientset(), &fakeSigner{}, Options{
				SignerNames: []string{servedSigner}, BackoffInitial: time.Millisecond, BackoffMax: time.Second, Clock: clk,
			})
			if err != nil {
				t.Fatal(err)
			}
			csr := tt.csr
			if csr == nil {
				csr = newCSR("csr", approvedAt(cond))
			}
			for _, off := range tt.seen {
				clk.SetTime(cond.Add(off))
				if !c.wants(csr) {
					t.Fatal("wants turned down an approved CSR")
				}
			}
			clk.SetTime(cond.Add(tt.written))
			if got := c.since(c.issuanceStart(csr)); got != tt.want {
				t.Errorf("latency = %s, want %s", got, tt.want)
			}
		})
	}
}

// seenAt returns when c recorded CSR uid seen approved, and whether it has.
func seenAt(c *Controller, uid types.UID) (time.Time, bool) {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	at, ok := c.seen[uid]
	return at, ok
}

// seenCount is the number of CSRs c has recorded seen approved.
func seenCount(c *Controller) int {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	return len(c.seen)
}

// TestWantsRecordsSightings: the queue filter records the first time it accepts a CSR, not
// the CSRs it turns down, and forgets a CSR turned down later or deleted.
func TestWantsRecordsSightings(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(testNow)
	c, err := New(fake.NewClientset(), &fakeSigner{}, Options{
		SignerNames: []string{servedSigner}, BackoffInitial: time.Millisecond, BackoffMax: time.Second, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, csr := range []*certificatesv1.CertificateSigningRequest{
		newCSR("pending"),
		newCSR("other", approved, withSigner(otherSigner)),
		newCSR("denied", approved, withCondition(certificatesv1.CertificateDenied, corev1.ConditionTrue)),
	} {
		if c.wants(csr) {
			t.Errorf("wants(%s) = true", csr.Name)
		}
	}
	if n := seenCount(c); n != 0 {
		t.Errorf("%d CSRs recorded seen approved, want 0", n)
	}

	csr := newCSR("csr", approved)
	c.wants(csr)
	clk.SetTime(testNow.Add(time.Second))
	c.wants(csr)
	if at, ok := seenAt(c, csr.UID); !ok || !at.Equal(testNow) {
		t.Errorf("seen at %v (%v), want the first delivery %v", at, ok, testNow)
	}
	if c.wants(newCSR("csr", approved, withCertificate)) {
		t.Error("wants(signed) = true")
	}
	if _, ok := seenAt(c, csr.UID); ok {
		t.Error("a signed CSR is still recorded")
	}

	c.wants(csr)
	c.deleted(csr)
	c.deleted(nil) // not a CSR: ignored
	if _, ok := seenAt(c, csr.UID); ok {
		t.Error("a deleted CSR is still recorded")
	}
}

// TestIssuanceLatencyFromSighting drives the informers: a CSR approved (by the API server, at
// a whole second) 600 ms before the watch delivers the approval and signed 30 ms of the
// watcher's clock after that delivery reports 30 ms, not the 630 ms the condition's time
// gives; the record is gone once the certificate is written, and a deleted CSR's record is
// forgotten.
func TestIssuanceLatencyFromSighting(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(testNow.Add(600 * time.Millisecond))
	metrics := &looptest.Metrics{}
	c, kube, ctx := newTestControllerWith(t, &fakeSigner{}, func(o *Options) {
		o.Clock, o.Metrics = clk, metrics
	}, newCSR("csr"), newCSR("deleted"))
	if n := seenCount(c); n != 0 {
		t.Fatalf("%d pending CSRs recorded seen approved, want 0", n)
	}

	csrs := kube.CertificatesV1().CertificateSigningRequests()
	for _, name := range []string{"csr", "deleted"} {
		if _, err := csrs.UpdateApproval(ctx, name, newCSR(name, approvedAt(testNow)), metav1.UpdateOptions{}); err != nil {
			t.Fatalf("approving %s: %v", name, err)
		}
	}
	// Waits for the watch to deliver both approvals; the fake clock does not move meanwhile.
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return seenCount(c) == 2 && c.QueueDepth() == 2, nil
	})
	if err != nil {
		t.Fatalf("approvals not delivered: %d recorded, queue depth %d", seenCount(c), c.QueueDepth())
	}

	clk.SetTime(testNow.Add(630 * time.Millisecond))
	// The Signed CSR line is at -v=2 (the server logs every issuance at its default level).
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(2)))
	if err := c.sync(klog.NewContext(ctx, logger), "csr"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got, want := metrics.Latencies(), []time.Duration{30 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("latencies = %v, want %v", got, want)
	}
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	if !slices.ContainsFunc(strings.Split(logs, "\n"), func(line string) bool {
		return strings.Contains(line, "Signed CSR") && strings.Contains(line, `sinceApproval="30ms"`)
	}) {
		t.Errorf("logs lack the Signed CSR line with sinceApproval=\"30ms\":\n%s", logs)
	}
	if _, ok := seenAt(c, "uid-csr"); ok {
		t.Error("the signed CSR is still recorded")
	}

	if _, ok := seenAt(c, "uid-deleted"); !ok {
		t.Fatal("the CSR to delete is not recorded")
	}
	if err := csrs.Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return seenCount(c) == 0, nil
	})
	if err != nil {
		t.Errorf("records left after the signing and the deletion: %d", seenCount(c))
	}
}

package pcrsigner

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/watcher/internal/looptest"
)

// issuedStatus is the status the controller must write for the fake signer's answer.
func issuedStatus(message string) certificatesv1.PodCertificateRequestStatus {
	nb, na, ra := metav1.NewTime(issuedNotBefore), metav1.NewTime(issuedNotAfter), metav1.NewTime(issuedRefresh)
	return certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{
			Type: "Issued", Status: metav1.ConditionTrue, ObservedGeneration: 1,
			LastTransitionTime: metav1.NewTime(testNow), Reason: "Issued", Message: message,
		}},
		CertificateChain: testChain, NotBefore: &nb, NotAfter: &na, BeginRefreshAt: &ra,
	}
}

// deniedStatus is the status of a Denied condition with reason and message, and nothing else.
func deniedStatus(reason, message string) certificatesv1.PodCertificateRequestStatus {
	return certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{{
		Type: "Denied", Status: metav1.ConditionTrue, ObservedGeneration: 1,
		LastTransitionTime: metav1.NewTime(testNow), Reason: reason, Message: message,
	}}}
}

const issuedMessage = "certificate issued by example.com/pods, serial 0abc, valid until 2026-05-05T11:59:00Z"

// TestSync checks every rung of the ladder: what is written (exactly), the Event, the
// outcome, and whether the object is re-queued.
func TestSync(t *testing.T) {
	tests := []struct {
		name        string
		pcr         *certificatesv1.PodCertificateRequest // nil: not in the cache
		signErrs    []error
		requeues    int
		always      bool
		wantCalls   int
		wantErr     bool
		wantStatus  *certificatesv1.PodCertificateRequestStatus // nil: no write
		wantEvent   string
		wantOutcome string // "" none
	}{
		{name: "pending is issued in one write", pcr: newPCR("pcr"), wantCalls: 1,
			wantStatus: ptr(issuedStatus(issuedMessage)), wantOutcome: OutcomeSigned},
		{name: "issued after retries gets a Signed Event", pcr: newPCR("pcr"), requeues: 2, wantCalls: 1,
			wantStatus: ptr(issuedStatus(issuedMessage)), wantOutcome: OutcomeSigned,
			wantEvent: "Normal Signed " + issuedMessage},
		{name: "issued, every certificate gets an Event", pcr: newPCR("pcr"), always: true, wantCalls: 1,
			wantStatus: ptr(issuedStatus(issuedMessage)), wantOutcome: OutcomeSigned,
			wantEvent: "Normal Signed " + issuedMessage},
		{name: "not found", pcr: nil},
		{name: "other signer", pcr: newPCR("pcr", withSigner(otherSigner))},
		{name: "already issued", pcr: newPCR("pcr", withCondition("Issued"), withChain)},
		{name: "denied", pcr: newPCR("pcr", withCondition("Denied"))},
		{name: "failed", pcr: newPCR("pcr", withCondition("Failed"))},
		{name: "chain without condition", pcr: newPCR("pcr", withChain)},
		{name: "unsupported key is UnsupportedKeyType", pcr: newPCR("pcr"), wantCalls: 1,
			signErrs:   []error{grpcError(t, codes.InvalidArgument, "UNSUPPORTED_KEY", "RSA-3072 is not accepted; use ECDSA P-256 or Ed25519")},
			wantStatus: ptr(deniedStatus("UnsupportedKeyType", "RSA-3072 is not accepted; use ECDSA P-256 or Ed25519")),
			wantEvent:  "Warning UnsupportedKeyType RSA-3072 is not accepted; use ECDSA P-256 or Ed25519", wantOutcome: OutcomeDenied},
		{name: "unknown annotation is InvalidUnverifiedUserAnnotations", pcr: newPCR("pcr"), wantCalls: 1,
			signErrs:   []error{grpcError(t, codes.InvalidArgument, "UNKNOWN_ANNOTATION", `unknown annotation "example.com/x"`)},
			wantStatus: ptr(deniedStatus("InvalidUnverifiedUserAnnotations", `unknown annotation "example.com/x"`)),
			wantEvent:  `Warning InvalidUnverifiedUserAnnotations unknown annotation "example.com/x"`, wantOutcome: OutcomeDenied},
		{name: "policy violation keeps the CSR reason", pcr: newPCR("pcr"), wantCalls: 1,
			signErrs:   []error{grpcError(t, codes.FailedPrecondition, "POLICY_VIOLATION", "namespace apps may not use this signer")},
			wantStatus: ptr(deniedStatus("PolicyViolation", "namespace apps may not use this signer")),
			wantEvent:  "Warning PolicyViolation namespace apps may not use this signer", wantOutcome: OutcomeDenied},
		{name: "terminal without ErrorInfo", pcr: newPCR("pcr"), wantCalls: 1,
			signErrs:   []error{status.Error(codes.InvalidArgument, "bad request")},
			wantStatus: ptr(deniedStatus("SignerRefused", "bad request")),
			wantEvent:  "Warning SignerRefused bad request", wantOutcome: OutcomeDenied},
		{name: "server unavailable is retried, never Failed", pcr: newPCR("pcr"), wantCalls: 1, wantErr: true,
			signErrs:  []error{status.Error(codes.Unavailable, "connection refused")},
			wantEvent: "Warning SignerUnavailable connection refused; retrying in 10ms (attempt 1)", wantOutcome: OutcomeRetried},
		{name: "internal is retried", pcr: newPCR("pcr"), wantCalls: 1, wantErr: true, requeues: 3,
			signErrs:  []error{grpcError(t, codes.Internal, "INTERNAL", "signing failed")},
			wantEvent: "Warning Internal signing failed; retrying in 80ms (attempt 4)", wantOutcome: OutcomeRetried},
		{name: "ledger unavailable is retried", pcr: newPCR("pcr"), wantCalls: 1, wantErr: true, requeues: 9,
			signErrs:  []error{grpcError(t, codes.Unavailable, "LEDGER_UNAVAILABLE", "ledger is read-only")},
			wantEvent: "Warning LedgerUnavailable ledger is read-only; retrying in 100ms (attempt 10)", wantOutcome: OutcomeRetried},
		{name: "rate limited is retried", pcr: newPCR("pcr"), wantCalls: 1, wantErr: true,
			signErrs:  []error{grpcError(t, codes.ResourceExhausted, "RATE_LIMITED", "slow down")},
			wantEvent: "Warning RateLimited slow down; retrying in 10ms (attempt 1)", wantOutcome: OutcomeRetried},
		{name: "non-gRPC error is retried", pcr: newPCR("pcr"), wantCalls: 1, wantErr: true,
			signErrs:  []error{errors.New("dial tcp: i/o timeout")},
			wantEvent: "Warning SignerUnavailable dial tcp: i/o timeout; retrying in 10ms (attempt 1)", wantOutcome: OutcomeRetried},
		{name: "transient just before the deadline is retried", pcr: newPCR("pcr", createdAt(testNow.Add(-9*time.Minute))),
			wantCalls: 1, wantErr: true, signErrs: []error{status.Error(codes.Unavailable, "connection refused")},
			wantEvent: "Warning SignerUnavailable connection refused; retrying in 10ms (attempt 1)", wantOutcome: OutcomeRetried},
		{name: "transient past the deadline is dropped without a condition", pcr: newPCR("pcr", createdAt(testNow.Add(-10*time.Minute))),
			wantCalls: 1, signErrs: []error{status.Error(codes.Unavailable, "connection refused")},
			wantEvent: "Warning SigningDeadlineExceeded the signing server did not issue the certificate within 10m0s of the request's " +
				"creation (created 10m0s ago); last error: SignerUnavailable: connection refused; no longer retried: " +
				"the kubelet replaces a request that stays pending",
			wantOutcome: OutcomeAbandoned},
		{name: "old request is still signed", pcr: newPCR("pcr", createdAt(testNow.Add(-12*time.Minute))), wantCalls: 1,
			wantStatus: ptr(issuedStatus(issuedMessage)), wantOutcome: OutcomeSigned},
		{name: "terminal past the deadline is still Denied", pcr: newPCR("pcr", createdAt(testNow.Add(-12*time.Minute))), wantCalls: 1,
			signErrs:   []error{grpcError(t, codes.InvalidArgument, "INVALID_SIGNATURE", "the stub request's signature does not verify")},
			wantStatus: ptr(deniedStatus("InvalidSignature", "the stub request's signature does not verify")),
			wantEvent:  "Warning InvalidSignature the stub request's signature does not verify", wantOutcome: OutcomeDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			if tt.pcr != nil {
				objs = append(objs, tt.pcr)
			}
			signer := &fakeSigner{errs: tt.signErrs}
			metrics := &looptest.Metrics{}
			rec := record.NewFakeRecorder(10)
			c, kube, ctx := newTestController(t, signer, V1, func(o *Options) {
				o.Metrics, o.Recorder, o.SignedEventAlways = metrics, rec, tt.always
			}, objs...)
			for range tt.requeues {
				c.loop.Queue().AddRateLimited(testKey)
			}
			cached, err := c.get(testNS, "pcr")
			if err != nil || (cached == nil) != (tt.pcr == nil) {
				t.Fatalf("cache holds %v, %v", cached, err)
			}
			var snapshot runtime.Object
			if cached != nil {
				snapshot = cached.object.DeepCopyObject()
			}

			if err := c.sync(ctx, testKey); (err != nil) != tt.wantErr {
				t.Fatalf("sync() = %v, want error %v", err, tt.wantErr)
			}
			if got := signer.callCount(); got != tt.wantCalls {
				t.Errorf("signer called %d times, want %d", got, tt.wantCalls)
			}
			updates := statusUpdates(t, kube)
			switch {
			case tt.wantStatus == nil && len(updates) > 0:
				t.Errorf("unexpected status write: %+v", updates[0])
			case tt.wantStatus != nil && len(updates) != 1:
				t.Errorf("%d status writes, want exactly 1", len(updates))
			case tt.wantStatus != nil && !equality.Semantic.DeepEqual(updates[0], *tt.wantStatus):
				t.Errorf("status written =\n%+v\nwant\n%+v", updates[0], *tt.wantStatus)
			}
			if got := looptest.Events(rec); (tt.wantEvent == "" && len(got) > 0) || (tt.wantEvent != "" && !slices.Equal(got, []string{tt.wantEvent})) {
				t.Errorf("events = %q, want [%q]", got, tt.wantEvent)
			}
			var wantOutcomes []string
			if tt.wantOutcome != "" {
				wantOutcomes = []string{servedSigner + " " + tt.wantOutcome}
			}
			if got := metrics.Outcomes(); !slices.Equal(got, wantOutcomes) {
				t.Errorf("outcomes = %v, want %v", got, wantOutcomes)
			}
			if tt.wantOutcome == OutcomeSigned && (len(metrics.Latencies()) != 1 || metrics.Latencies()[0] != testNow.Sub(tt.pcr.CreationTimestamp.Time)) {
				t.Errorf("latencies = %v, want [time since creation]", metrics.Latencies())
			}
			if cached != nil && !equality.Semantic.DeepEqual(cached.object, snapshot) {
				t.Errorf("cached object mutated:\n%+v\nwant\n%+v", cached.object, snapshot)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestSyncForwardsSpec: what the signer receives is the object's identity and spec.
func TestSyncForwardsSpec(t *testing.T) {
	pcr := newPCR("pcr")
	pcr.Spec.UnverifiedUserAnnotations = map[string]string{"example.com/role": "web"}
	signer := &fakeSigner{}
	c, _, ctx := newTestController(t, signer, V1, nil, pcr)
	if err := c.sync(ctx, testKey); err != nil {
		t.Fatal(err)
	}
	got := signer.calls[0]
	if got.UID != pcr.UID || got.Namespace != testNS || got.Name != "pcr" || got.SignerName != servedSigner ||
		got.ServiceAccountName != "web" || string(got.StubPKCS10Request) != "stub" || *got.MaxExpirationSeconds != 86400 ||
		got.UnverifiedUserAnnotations["example.com/role"] != "web" {
		t.Errorf("signer got %+v", got)
	}
}

func TestDeniedReason(t *testing.T) {
	for in, want := range map[string]string{
		"UnsupportedKey": "UnsupportedKeyType", "UnknownAnnotation": "InvalidUnverifiedUserAnnotations",
		"PolicyViolation": "PolicyViolation", "LintFailed": "LintFailed", "MalformedRequest": "MalformedRequest",
		"IdempotencyConflict": "IdempotencyConflict", "SignerRefused": "SignerRefused",
	} {
		if got := DeniedReason(in); got != want {
			t.Errorf("DeniedReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestManagedFieldsDropped(t *testing.T) {
	c, _, _ := newTestController(t, &fakeSigner{}, V1, nil, newPCR("pcr"))
	r, err := c.get(testNS, "pcr")
	if err != nil || r == nil {
		t.Fatalf("get: %v, %v", r, err)
	}
	if mf := r.object.(*certificatesv1.PodCertificateRequest).ManagedFields; len(mf) != 0 {
		t.Errorf("managedFields cached: %v", mf)
	}
}

// TestFinishedTrimmed checks what the cache keeps of each object, in both versions: one to
// be signed is whole; once issued (by the controller, seen through the watch) or if already
// denied, it has no key material left and its chain is a stand-in that still makes sync skip it.
func TestFinishedTrimmed(t *testing.T) {
	t.Run("v1", func(t *testing.T) {
		c, _, ctx := newTestController(t, &fakeSigner{}, V1, nil, newPCR("pcr"), newPCR("denied", withCondition("Denied")))
		cached := func(name string) *certificatesv1.PodCertificateRequest {
			r, err := c.get(testNS, name)
			if err != nil || r == nil {
				t.Fatalf("get(%s): %v, %v", name, r, err)
			}
			return r.object.(*certificatesv1.PodCertificateRequest)
		}
		if got := cached("pcr").Spec.StubPKCS10Request; string(got) != "stub" {
			t.Errorf("pending object cached with stub %q, want it whole", got)
		}
		if got := cached("denied").Spec.StubPKCS10Request; got != nil {
			t.Errorf("denied object cached with stub %q, want none", got)
		}
		if err := c.sync(ctx, testKey); err != nil {
			t.Fatalf("sync() = %v", err)
		}
		waitCached(t, c, func(r *request) bool {
			return r.status.CertificateChain == trimmedChain && r.pcr.StubPKCS10Request == nil
		})
		if why := skipReason(toRequest(cached("pcr")), c.loop.Serves); why != "issued" {
			t.Errorf("skipReason of the trimmed object = %q, want issued", why)
		}
	})
	t.Run("v1beta1", func(t *testing.T) {
		c, _, ctx := newTestController(t, &fakeSigner{}, V1beta1, nil, newBetaPCR("pcr"))
		if err := c.sync(ctx, testKey); err != nil {
			t.Fatalf("sync() = %v", err)
		}
		waitCached(t, c, func(r *request) bool {
			return r.status.CertificateChain == trimmedChain && r.pcr.PKIXPublicKey == nil && r.pcr.ProofOfPossession == nil
		})
	})
}

func TestNewErrors(t *testing.T) {
	kube := looptest.NewClientset()
	valid := Options{Version: V1, SignerNames: []string{servedSigner}, BackoffInitial: time.Second, BackoffMax: time.Second}
	for name, mutate := range map[string]func(*Options){
		"not served":         func(o *Options) { o.Version = NotServed },
		"unknown version":    func(o *Options) { o.Version = "v2" },
		"no signer names":    func(o *Options) { o.SignerNames = nil },
		"no back-off":        func(o *Options) { o.BackoffInitial = 0 },
		"max below initial":  func(o *Options) { o.BackoffMax = time.Millisecond },
		"max at the give-up": func(o *Options) { o.BackoffMax, o.GiveUpAfter = time.Minute, time.Minute },
	} {
		opts := valid
		mutate(&opts)
		if _, err := New(kube, &fakeSigner{}, opts); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
	if _, err := New(kube, &fakeSigner{}, valid); err != nil {
		t.Errorf("valid options: New() = %v", err)
	}
}

// TestRun drives the whole controller: a request created after start fails transiently once,
// then is issued; another signer's request is never sent; the Events and outcomes follow.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kube := looptest.NewClientset(newPCR("other", withSigner(otherSigner)))
	signer := &fakeSigner{errs: []error{status.Error(codes.Unavailable, "connection refused")}}
	metrics := &looptest.Metrics{}
	rec := record.NewFakeRecorder(10)
	c, err := New(kube, signer, Options{
		Version: V1, SignerNames: []string{servedSigner, servedSigner},
		BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		Clock: clocktesting.NewFakePassiveClock(testNow), Metrics: metrics, Recorder: rec,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()

	pcrs := kube.CertificatesV1().PodCertificateRequests(testNS)
	if _, err := pcrs.Create(ctx, newPCR("pcr"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := pcrs.Get(ctx, "pcr", metav1.GetOptions{})
		return err == nil && p.Status.CertificateChain == testChain, nil
	})
	if err != nil {
		t.Fatalf("not issued: %v", err)
	}
	if got := signer.callCount(); got != 2 {
		t.Errorf("signer called %d times, want 2 (one transient failure, one success)", got)
	}
	signer.mu.Lock()
	for _, call := range signer.calls {
		if call.Name != "pcr" {
			t.Errorf("signer called for %q", call.Name)
		}
	}
	signer.mu.Unlock()
	want := []string{"Warning SignerUnavailable connection refused; retrying in 10ms (attempt 1)", "Normal Signed " + issuedMessage}
	if got := looptest.WaitEvents(rec, len(want), 5*time.Second); !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if got, want := metrics.Outcomes(), []string{servedSigner + " retried", servedSigner + " signed"}; !slices.Equal(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
	}
	if !c.HasSynced() {
		t.Error("HasSynced() = false while running")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v, want nil after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if err := c.Run(context.Background(), 0); err == nil {
		t.Error("Run with 0 workers succeeded")
	}
}

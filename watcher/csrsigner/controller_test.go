package csrsigner

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/internal/looptest"
	"github.com/signet-pki/signet/watcher/internal/workloop"
)

const (
	servedSigner = "example.com/serving"
	otherSigner  = "other.example.com/serving"
	testChain    = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
)

var testNow = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// fakeSigner returns chain (testChain if empty) with serial and notAfter (unset: the
// controller parses the chain), or the next of errs while any remain.
type fakeSigner struct {
	mu       sync.Mutex
	errs     []error
	chain    []byte
	serial   string
	notAfter time.Time
	calls    []string
	requests []string // spec.request of each call
}

func (s *fakeSigner) SignCSR(_ context.Context, csr *certificatesv1.CertificateSigningRequest) (signerclient.Issued, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, csr.Name)
	s.requests = append(s.requests, string(csr.Spec.Request))
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return signerclient.Issued{}, err
	}
	issued := signerclient.Issued{Chain: []byte(testChain), Serial: s.serial, NotAfter: s.notAfter}
	if len(s.chain) > 0 {
		issued.Chain = s.chain
	}
	return issued, nil
}

func (s *fakeSigner) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// csrOption changes a test CSR.
type csrOption func(*certificatesv1.CertificateSigningRequest)

func withCondition(t certificatesv1.RequestConditionType, s corev1.ConditionStatus) csrOption {
	return func(csr *certificatesv1.CertificateSigningRequest) {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: t, Status: s, Reason: "Test",
		})
	}
}

var approved = withCondition(certificatesv1.CertificateApproved, corev1.ConditionTrue)

func withSigner(name string) csrOption {
	return func(csr *certificatesv1.CertificateSigningRequest) { csr.Spec.SignerName = name }
}

func withCertificate(csr *certificatesv1.CertificateSigningRequest) {
	csr.Status.Certificate = []byte("existing")
}

func newCSR(name string, opts ...csrOption) *certificatesv1.CertificateSigningRequest {
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID("uid-" + name),
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: servedSigner,
			Request:    []byte("-----BEGIN CERTIFICATE REQUEST-----\n..."),
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth},
		},
	}
	for _, opt := range opts {
		opt(csr)
	}
	return csr
}

// newTestController returns a controller over a fake clientset holding objs, with its caches
// started and synced (the fake clientset ignores field selectors, so every CSR is cached).
func newTestController(t *testing.T, signer *fakeSigner, objs ...runtime.Object) (*Controller, *fake.Clientset, context.Context) {
	t.Helper()
	return newTestControllerWith(t, signer, nil, objs...)
}

// newTestControllerWith is newTestController with the options changed by mutate, if not nil.
func newTestControllerWith(t *testing.T, signer *fakeSigner, mutate func(*Options), objs ...runtime.Object) (*Controller, *fake.Clientset, context.Context) {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	kube := looptest.NewClientset(objs...)
	opts := Options{
		SignerNames:    []string{servedSigner},
		BackoffInitial: 10 * time.Millisecond,
		BackoffMax:     100 * time.Millisecond,
		Clock:          clocktesting.NewFakePassiveClock(testNow),
	}
	if mutate != nil {
		mutate(&opts)
	}
	c, err := New(kube, signer, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	looptest.Start(t, ctx, cancel, c.loop)
	logger.V(4).Info("Test controller ready")
	kube.ClearActions()
	return c, kube, ctx
}

// statusUpdates returns the CSRs written with UpdateStatus, checking their field manager.
func statusUpdates(t *testing.T, kube *fake.Clientset) []*certificatesv1.CertificateSigningRequest {
	t.Helper()
	var out []*certificatesv1.CertificateSigningRequest
	for _, action := range kube.Actions() {
		update, ok := action.(clienttesting.UpdateActionImpl)
		if !ok || action.GetSubresource() != "status" {
			continue
		}
		if fm := update.GetUpdateOptions().FieldManager; fm != workloop.FieldManager {
			t.Errorf("field manager = %q, want %q", fm, workloop.FieldManager)
		}
		out = append(out, update.GetObject().(*certificatesv1.CertificateSigningRequest))
	}
	return out
}

func terminalError(t *testing.T, reason, msg string) error {
	t.Helper()
	st, err := status.New(codes.InvalidArgument, msg).
		WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "signet.dev"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestSync(t *testing.T) {
	tests := []struct {
		name       string
		csr        *certificatesv1.CertificateSigningRequest // nil: not in the cache
		signErrs   []error
		wantCalls  int
		wantErr    bool
		wantUpdate func(t *testing.T, got *certificatesv1.CertificateSigningRequest) // nil: no update
	}{
		{name: "approved is signed", csr: newCSR("csr", approved), wantCalls: 1,
			wantUpdate: func(t *testing.T, got *certificatesv1.CertificateSigningRequest) {
				if string(got.Status.Certificate) != testChain {
					t.Errorf("certificate = %q, want the chain", got.Status.Certificate)
				}
				if len(got.Status.Conditions) != 1 {
					t.Errorf("conditions = %v, want only Approved", got.Status.Conditions)
				}
			}},
		{name: "not found", csr: nil},
		{name: "pending", csr: newCSR("csr")},
		{name: "approved false", csr: newCSR("csr", withCondition(certificatesv1.CertificateApproved, corev1.ConditionFalse))},
		{name: "denied", csr: newCSR("csr", approved, withCondition(certificatesv1.CertificateDenied, corev1.ConditionTrue))},
		{name: "failed", csr: newCSR("csr", approved, withCondition(certificatesv1.CertificateFailed, corev1.ConditionTrue))},
		{name: "already signed", csr: newCSR("csr", approved, withCertificate)},
		{name: "other signer", csr: newCSR("csr", approved, withSigner(otherSigner))},
		{name: "terminal refusal is Failed", csr: newCSR("csr", approved), wantCalls: 1,
			signErrs: []error{terminalError(t, "UNSUPPORTED_KEY", "RSA-2048 is below the minimum of 3072 bits")},
			wantUpdate: func(t *testing.T, got *certificatesv1.CertificateSigningRequest) {
				if len(got.Status.Certificate) != 0 {
					t.Errorf("certificate written on refusal")
				}
				want := certificatesv1.CertificateSigningRequestCondition{
					Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue,
					Reason: "UnsupportedKey", Message: "RSA-2048 is below the minimum of 3072 bits",
					LastUpdateTime: metav1.NewTime(testNow), LastTransitionTime: metav1.NewTime(testNow),
				}
				conds := got.Status.Conditions
				if len(conds) != 2 || conds[0].Type != certificatesv1.CertificateApproved || !conds[1].LastUpdateTime.Equal(&want.LastUpdateTime) {
					t.Fatalf("conditions = %+v, want Approved then %+v", conds, want)
				}
				conds[1].LastUpdateTime, conds[1].LastTransitionTime = want.LastUpdateTime, want.LastTransitionTime
				if conds[1] != want {
					t.Errorf("Failed condition = %+v, want %+v", conds[1], want)
				}
			}},
		{name: "transient error is retried", csr: newCSR("csr", approved), wantCalls: 1, wantErr: true,
			signErrs: []error{status.Error(codes.Unavailable, "connection refused")}},
		{name: "non-gRPC error is retried", csr: newCSR("csr", approved), wantCalls: 1, wantErr: true,
			signErrs: []error{errors.New("dial tcp: i/o timeout")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			if tt.csr != nil {
				objs = append(objs, tt.csr)
			}
			signer := &fakeSigner{errs: tt.signErrs}
			c, kube, ctx := newTestController(t, signer, objs...)
			// The CSR is in the cache (the fake ignores field selectors, so the other signer's
			// too); sync must not mutate it.
			cached, err := c.get("csr")
			if err != nil || (cached == nil) != (tt.csr == nil) {
				t.Fatalf("cache holds %v, %v", cached, err)
			}
			snapshot := cached.DeepCopy()

			err = c.sync(ctx, "csr")
			if (err != nil) != tt.wantErr {
				t.Fatalf("sync() error = %v, want error %v", err, tt.wantErr)
			}
			if got := signer.callCount(); got != tt.wantCalls {
				t.Errorf("signer called %d times, want %d", got, tt.wantCalls)
			}
			updates := statusUpdates(t, kube)
			switch {
			case tt.wantUpdate == nil && len(updates) > 0:
				t.Errorf("unexpected status update: %+v", updates[0].Status)
			case tt.wantUpdate != nil && len(updates) != 1:
				t.Errorf("got %d status updates, want 1", len(updates))
			case tt.wantUpdate != nil:
				tt.wantUpdate(t, updates[0])
			}
			if cached != nil && !equality.Semantic.DeepEqual(cached, snapshot) {
				t.Errorf("cached object mutated:\n%+v\nwant\n%+v", cached, snapshot)
			}
		})
	}
}

func TestSyncUpdateErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
	tests := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"repeated conflict is re-queued", apierrors.NewConflict(gr, "csr", errors.New("modified")), true},
		{"not found is dropped", apierrors.NewNotFound(gr, "csr"), false},
		{"other errors are re-queued", apierrors.NewInternalError(errors.New("etcd")), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, kube, ctx := newTestController(t, &fakeSigner{}, newCSR("csr", approved))
			kube.PrependReactor("update", "certificatesigningrequests", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.err
			})
			if err := c.sync(ctx, "csr"); (err != nil) != tt.wantErr {
				t.Errorf("sync() error = %v, want error %v", err, tt.wantErr)
			}
			// A CSR re-queued keeps its sighting; one dropped is done with.
			if _, ok := seenAt(c, "uid-csr"); ok != tt.wantErr {
				t.Errorf("sighting recorded after sync: %v, want %v", ok, tt.wantErr)
			}
		})
	}
}

func TestManagedFieldsDropped(t *testing.T) {
	c, _, _ := newTestController(t, &fakeSigner{}, newCSR("csr"))
	csr, err := c.get("csr")
	if err != nil || csr == nil {
		t.Fatalf("get: %v, %v", csr, err)
	}
	if len(csr.ManagedFields) != 0 {
		t.Errorf("managedFields cached: %v", csr.ManagedFields)
	}
}

// TestFinishedCSRsTrimmed checks what the cache keeps of each CSR: a CSR to be signed is
// whole; one that is signed, denied or failed has no request, and a signed one's certificate
// is a stand-in, so that thousands of finished CSRs cost little memory; sync still skips
// them; and a CSR the controller signs is trimmed once the informer sees the write.
func TestFinishedCSRsTrimmed(t *testing.T) {
	signer := &fakeSigner{errs: []error{status.Error(codes.Unavailable, "connection refused")}}
	c, _, ctx := newTestController(t, signer,
		newCSR("signed", approved, withCertificate),
		newCSR("denied", withCondition(certificatesv1.CertificateDenied, corev1.ConditionTrue)),
		newCSR("failed", approved, withCondition(certificatesv1.CertificateFailed, corev1.ConditionTrue)),
		newCSR("to-sign", approved))
	whole := newCSR("x").Spec.Request
	for name, want := range map[string]struct {
		request, certificate []byte
	}{
		"signed":  {nil, trimmedCertificate},
		"denied":  {nil, nil},
		"failed":  {nil, nil},
		"to-sign": {whole, nil},
	} {
		csr, err := c.get(name)
		if err != nil || csr == nil {
			t.Fatalf("get(%s): %v, %v", name, csr, err)
		}
		if !slices.Equal(csr.Spec.Request, want.request) || !slices.Equal(csr.Status.Certificate, want.certificate) {
			t.Errorf("%s cached with request %q, certificate %q; want %q, %q", name, csr.Spec.Request, csr.Status.Certificate, want.request, want.certificate)
		}
		if why := skipReason(csr, c.loop.Serves); (why == "") != (name == "to-sign") {
			t.Errorf("%s: skipReason = %q after trimming", name, why)
		}
	}
	for _, name := range []string{"signed", "denied", "failed"} {
		if err := c.sync(ctx, name); err != nil {
			t.Errorf("sync(%s) = %v", name, err)
		}
	}
	if got := signer.callCount(); got != 0 {
		t.Fatalf("signer called %d times for finished CSRs", got)
	}
	if err := c.sync(ctx, "to-sign"); err == nil {
		t.Fatal("sync(to-sign) with the signer unavailable = nil, want the error")
	}
	if err := c.sync(ctx, "to-sign"); err != nil {
		t.Fatalf("sync(to-sign) = %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		csr, err := c.get("to-sign")
		return err == nil && csr != nil && slices.Equal(csr.Status.Certificate, trimmedCertificate) && csr.Spec.Request == nil, err
	})
	if err != nil {
		t.Errorf("the signed CSR was not trimmed in the cache: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	kube := looptest.NewClientset()
	for name, opts := range map[string]Options{
		"no signer names": {BackoffInitial: time.Second, BackoffMax: time.Second},
		"no back-off":     {SignerNames: []string{servedSigner}},
		"max below init":  {SignerNames: []string{servedSigner}, BackoffInitial: time.Second, BackoffMax: time.Millisecond},
		"max not below give-up": {SignerNames: []string{servedSigner}, BackoffInitial: time.Second, BackoffMax: time.Minute,
			GiveUpAfter: time.Minute},
		"max not below default give-up": {SignerNames: []string{servedSigner}, BackoffInitial: time.Second, BackoffMax: time.Hour},
	} {
		if _, err := New(kube, &fakeSigner{}, opts); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
}

// TestRun drives the whole controller: a CSR is approved after start, the first call fails
// transiently, the retry signs it; a CSR of another signer is never sent.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kube := looptest.NewClientset(newCSR("other", approved, withSigner(otherSigner)))
	signer := &fakeSigner{errs: []error{status.Error(codes.Unavailable, "connection refused")}}
	metrics := &looptest.Metrics{}
	rec := record.NewFakeRecorder(10)
	c, err := New(kube, signer, Options{
		SignerNames:    []string{servedSigner, servedSigner},
		BackoffInitial: 10 * time.Millisecond,
		BackoffMax:     50 * time.Millisecond,
		Clock:          clocktesting.NewFakePassiveClock(testNow),
		Metrics:        metrics,
		Recorder:       rec,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()

	csrs := kube.CertificatesV1().CertificateSigningRequests()
	if _, err := csrs.Create(ctx, newCSR("csr"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CSR: %v", err)
	}
	if _, err := csrs.UpdateApproval(ctx, "csr", newCSR("csr", approved), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("approving CSR: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		csr, err := csrs.Get(ctx, "csr", metav1.GetOptions{})
		return err == nil && string(csr.Status.Certificate) == testChain, nil
	})
	if err != nil {
		t.Fatalf("CSR was not signed: %v", err)
	}
	if got := signer.callCount(); got != 2 {
		t.Errorf("signer called %d times, want 2 (one transient failure, one success)", got)
	}
	signer.mu.Lock()
	for i, name := range signer.calls {
		if name != "csr" {
			t.Errorf("signer called for %q", name)
		}
		// The CSR was cached trimmed while pending (see trim); its approval brought it whole.
		if want := string(newCSR("csr").Spec.Request); signer.requests[i] != want {
			t.Errorf("call %d: request = %q, want %q", i, signer.requests[i], want)
		}
	}
	signer.mu.Unlock()
	// The Event follows the status write the poll above saw.
	wantEvents := []string{
		"Warning SignerUnavailable connection refused; retrying in 10ms (attempt 1)",
		"Normal Signed certificate issued by example.com/serving",
	}
	if gotEvents := looptest.WaitEvents(rec, len(wantEvents), 5*time.Second); !slices.Equal(gotEvents, wantEvents) {
		t.Errorf("events = %q, want %q", gotEvents, wantEvents)
	}
	if got, want := metrics.Outcomes(), []string{servedSigner + " retried", servedSigner + " signed"}; !slices.Equal(got, want) {
		t.Errorf("outcomes = %v, want %v", got, want)
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
}

package pcrsigner

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/objectrequest"
	"github.com/signet-pki/signet/signerclient"
	"github.com/signet-pki/signet/watcher/internal/looptest"
	"github.com/signet-pki/signet/watcher/internal/workloop"
)

const (
	servedSigner = "example.com/pods"
	otherSigner  = "other.example.com/pods"
	testNS       = "apps"
	testKey      = testNS + "/pcr"
	testChain    = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
)

var (
	testNow = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	// The times the fake server answers with.
	issuedNotBefore = testNow.Add(-time.Minute)
	issuedNotAfter  = issuedNotBefore.Add(24 * time.Hour)
	issuedRefresh   = issuedNotBefore.Add(18 * time.Hour)
)

var pcrGVR = certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests")

// fakeSigner answers with testChain, serial 0abc and the issued* times, or the next of errs
// while any remain, and records the requests.
type fakeSigner struct {
	mu    sync.Mutex
	errs  []error
	calls []objectrequest.PCR
}

func (s *fakeSigner) SignPCR(_ context.Context, pcr objectrequest.PCR) (signerclient.Issued, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, pcr)
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return signerclient.Issued{}, err
	}
	return signerclient.Issued{Chain: []byte(testChain), Serial: "0abc",
		NotBefore: issuedNotBefore, NotAfter: issuedNotAfter, BeginRefreshAt: issuedRefresh}, nil
}

func (s *fakeSigner) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// pcrOption changes a test object.
type pcrOption func(*certificatesv1.PodCertificateRequest)

func withSigner(name string) pcrOption {
	return func(p *certificatesv1.PodCertificateRequest) { p.Spec.SignerName = name }
}

func withCondition(t string) pcrOption {
	return func(p *certificatesv1.PodCertificateRequest) {
		p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{
			Type: t, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.NewTime(testNow),
		})
	}
}

func withChain(p *certificatesv1.PodCertificateRequest) { p.Status.CertificateChain = "existing" }

func createdAt(t time.Time) pcrOption {
	return func(p *certificatesv1.PodCertificateRequest) { p.CreationTimestamp = metav1.NewTime(t) }
}

// newPCR is a pending v1 object in testNS, created a minute before testNow.
func newPCR(name string, opts ...pcrOption) *certificatesv1.PodCertificateRequest {
	maxSeconds := int32(86400)
	p := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNS, Name: name, UID: types.UID("uid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(testNow.Add(-time.Minute)),
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: servedSigner,
			PodName:    "web-0", PodUID: "pod-uid", ServiceAccountName: "web", ServiceAccountUID: "sa-uid",
			NodeName: "node-1", NodeUID: "node-uid", MaxExpirationSeconds: &maxSeconds,
			StubPKCS10Request: []byte("stub"),
		},
	}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// newBetaPCR is a pending v1beta1 object naming its key by PKIX key and proof of possession.
func newBetaPCR(name string) *certificatesv1beta1.PodCertificateRequest {
	v1 := newPCR(name)
	return &certificatesv1beta1.PodCertificateRequest{
		ObjectMeta: v1.ObjectMeta,
		Spec: certificatesv1beta1.PodCertificateRequestSpec{
			SignerName: v1.Spec.SignerName,
			PodName:    v1.Spec.PodName, PodUID: v1.Spec.PodUID,
			ServiceAccountName: v1.Spec.ServiceAccountName, ServiceAccountUID: v1.Spec.ServiceAccountUID,
			NodeName: v1.Spec.NodeName, NodeUID: v1.Spec.NodeUID,
			MaxExpirationSeconds: v1.Spec.MaxExpirationSeconds,
			PKIXPublicKey:        []byte("spki"),
			ProofOfPossession:    []byte("pop"),
		},
	}
}

// newTestController returns a controller for version over a fake clientset holding objs,
// with its caches started and synced (the fake ignores field selectors: every object is
// cached) and the options changed by mutate, if not nil.
func newTestController(t *testing.T, signer Signer, version APIVersion, mutate func(*Options), objs ...runtime.Object) (*Controller, *fake.Clientset, context.Context) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	kube := looptest.NewClientset(objs...)
	opts := Options{
		Version:        version,
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
	kube.ClearActions()
	return c, kube, ctx
}

// statusUpdates returns the objects written with UpdateStatus (v1 or v1beta1, as v1 status),
// checking their field manager.
func statusUpdates(t *testing.T, kube *fake.Clientset) []certificatesv1.PodCertificateRequestStatus {
	t.Helper()
	var out []certificatesv1.PodCertificateRequestStatus
	for _, action := range kube.Actions() {
		update, ok := action.(clienttesting.UpdateActionImpl)
		if !ok || action.GetSubresource() != "status" {
			continue
		}
		if fm := update.GetUpdateOptions().FieldManager; fm != workloop.FieldManager {
			t.Errorf("field manager = %q, want %q", fm, workloop.FieldManager)
		}
		switch o := update.GetObject().(type) {
		case *certificatesv1.PodCertificateRequest:
			out = append(out, o.Status)
		case *certificatesv1beta1.PodCertificateRequest:
			out = append(out, certificatesv1.PodCertificateRequestStatus(o.Status))
		default:
			t.Errorf("status update of a %T", o)
		}
	}
	return out
}

// grpcError returns a gRPC status error with an ErrorInfo reason of domain signet.dev.
func grpcError(t *testing.T, code codes.Code, reason, msg string) error {
	t.Helper()
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "signet.dev"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

package watcher

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/watcher/internal/looptest"
)

// pcrTimes are the times refusingServer answers PodCertificateRequests with.
var pcrTimes = struct{ notBefore, notAfter, refresh time.Time }{
	time.Date(2026, 5, 4, 11, 59, 0, 0, time.UTC), time.Date(2026, 5, 5, 11, 59, 0, 0, time.UTC), time.Date(2026, 5, 5, 5, 59, 0, 0, time.UTC),
}

// SignPodCertificateRequest issues testChain, unless the request carries the annotation
// example.com/unknown: UNKNOWN_ANNOTATION.
func (refusingServer) SignPodCertificateRequest(_ context.Context, req *signetv1.SignPodCertificateRequestRequest) (*signetv1.SignPodCertificateRequestResponse, error) {
	if _, ok := req.GetUnverifiedUserAnnotations()["example.com/unknown"]; ok {
		st, err := status.New(codes.InvalidArgument, `unverified user annotation "example.com/unknown" is not recognised`).
			WithDetails(&errdetails.ErrorInfo{Reason: "UNKNOWN_ANNOTATION", Domain: "signet.dev"})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	return &signetv1.SignPodCertificateRequestResponse{
		CertificateChainPem: testChain, SerialNumber: "0abc",
		NotBefore: timestamppb.New(pcrTimes.notBefore), NotAfter: timestamppb.New(pcrTimes.notAfter),
		BeginRefreshAt: timestamppb.New(pcrTimes.refresh),
	}, nil
}

func pendingPCR(name string, annotations map[string]string) *certificatesv1.PodCertificateRequest {
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Now()},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: "example.com/serving", PodName: "web-0", PodUID: "pod-uid",
			ServiceAccountName: "web", ServiceAccountUID: "sa-uid", NodeName: "node-1", NodeUID: "node-uid",
			StubPKCS10Request: []byte("stub"), UnverifiedUserAnnotations: annotations,
		},
	}
}

// pcrClientset is a fake clientset holding objs whose discovery serves PodCertificateRequests
// in certificates.k8s.io/v1 and whose SelfSubjectAccessReviews answer allowed.
func pcrClientset(allowed bool, objs ...runtime.Object) *fake.Clientset {
	kube := looptest.NewClientset(objs...)
	kube.Resources = []*metav1.APIResourceList{{GroupVersion: "certificates.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "certificatesigningrequests"}, {Name: "podcertificaterequests", Namespaced: true},
	}}}
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(action clienttesting.Action) (bool, runtime.Object, error) {
		review := action.(clienttesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		review.Status.Allowed = allowed
		return true, review, nil
	})
	return kube
}

// TestRunSignsPodCertificateRequests wires both controllers: on a cluster serving v1
// PodCertificateRequests, a good one is Issued with the server's times, one with an unknown
// annotation is Denied, a CSR is still signed, and /metrics and /readyz cover the PCR
// controller.
func TestRunSignsPodCertificateRequests(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addr := freeAddress(t)
	cfg := &Config{SignerNames: []string{"example.com/serving"}, Server: startServer(t), MetricsAddress: addr}
	kube := pcrClientset(true, approvedCSR("csr", "ok"),
		pendingPCR("good", nil), pendingPCR("bad", map[string]string{"example.com/unknown": "x"}))
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, kube, logger) }()

	pcrs := kube.CertificatesV1().PodCertificateRequests("apps")
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		good, err1 := pcrs.Get(ctx, "good", metav1.GetOptions{})
		bad, err2 := pcrs.Get(ctx, "bad", metav1.GetOptions{})
		csr, err3 := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, "csr", metav1.GetOptions{})
		return err1 == nil && err2 == nil && err3 == nil &&
			good.Status.CertificateChain != "" && len(bad.Status.Conditions) > 0 && len(csr.Status.Certificate) > 0, nil
	})
	if err != nil {
		t.Fatalf("objects not processed: %v", err)
	}
	good, _ := pcrs.Get(ctx, "good", metav1.GetOptions{})
	st := good.Status
	if st.CertificateChain != testChain || len(st.Conditions) != 1 || st.Conditions[0].Type != "Issued" ||
		!st.NotBefore.Time.Equal(pcrTimes.notBefore) || !st.NotAfter.Time.Equal(pcrTimes.notAfter) || !st.BeginRefreshAt.Time.Equal(pcrTimes.refresh) {
		t.Errorf("good status = %+v, want Issued with the server's chain and times", st)
	}
	bad, _ := pcrs.Get(ctx, "bad", metav1.GetOptions{})
	if c := bad.Status.Conditions[0]; c.Type != "Denied" || c.Reason != "InvalidUnverifiedUserAnnotations" || !strings.Contains(c.Message, "example.com/unknown") {
		t.Errorf("bad condition = %+v, want Denied InvalidUnverifiedUserAnnotations naming the key", c)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		code, body := get("http://" + addr + "/metrics")
		return code == http.StatusOK &&
			strings.Contains(body, `signet_watcher_pod_certificate_requests_handled_total{outcome="signed",signer="example.com/serving"} 1`) &&
			strings.Contains(body, `signet_watcher_pod_certificate_requests_handled_total{outcome="denied",signer="example.com/serving"} 1`), nil
	})
	if err != nil {
		_, body := get("http://" + addr + "/metrics")
		t.Errorf("PCR outcomes not counted: %v\n%s", err, grepLines(body, "pod_certificate"))
	}
	if code, body := get("http://" + addr + "/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz = %d %q, want 200", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}

// TestRunWithoutPodCertificateRequests: the PCR controller does not run when turned off, when
// the cluster does not serve PodCertificateRequests, or when the watcher lacks permissions;
// CSRs are signed all the same.
func TestRunWithoutPodCertificateRequests(t *testing.T) {
	disabled := false
	tests := map[string]struct {
		kube    func() *fake.Clientset
		enabled *bool
	}{
		"turned off": {func() *fake.Clientset {
			return pcrClientset(true, approvedCSR("csr", "ok"), pendingPCR("pcr", nil))
		}, &disabled},
		"not served": {func() *fake.Clientset {
			return looptest.NewClientset(approvedCSR("csr", "ok"), pendingPCR("pcr", nil))
		}, nil},
		"not permitted": {func() *fake.Clientset {
			return pcrClientset(false, approvedCSR("csr", "ok"), pendingPCR("pcr", nil))
		}, nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			logger, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			cfg := &Config{SignerNames: []string{"example.com/serving"}, Server: startServer(t),
				PodCertificateRequests: PodCertificateRequestsConfig{Enabled: tt.enabled}}
			kube := tt.kube()
			done := make(chan error, 1)
			go func() { done <- Run(ctx, cfg, kube, logger) }()
			err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				csr, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, "csr", metav1.GetOptions{})
				return err == nil && len(csr.Status.Certificate) > 0, nil
			})
			if err != nil {
				t.Fatalf("CSR not signed: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run() = %v, want nil", err)
			}
			for _, a := range kube.Actions() {
				if a.GetResource().Resource == "podcertificaterequests" && slices.Contains([]string{"list", "watch", "update"}, a.GetVerb()) {
					t.Errorf("PodCertificateRequests touched: %s %s", a.GetVerb(), a.GetResource())
				}
			}
		})
	}
}

package watcher

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/watcher/internal/mtlstest"
)

const testChain = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

// refusingServer signs every request except those whose PKCS#10 bytes are "refuse".
type refusingServer struct {
	signetv1.UnimplementedSignerServiceServer
}

func (refusingServer) SignCertificateSigningRequest(_ context.Context, req *signetv1.SignCertificateSigningRequestRequest) (*signetv1.SignCertificateSigningRequestResponse, error) {
	if string(req.GetRequest()) == "refuse" {
		st, err := status.New(codes.InvalidArgument, "requester may not use this signer").
			WithDetails(&errdetails.ErrorInfo{Reason: "POLICY_VIOLATION", Domain: "signet.dev"})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	return &signetv1.SignCertificateSigningRequestResponse{CertificateChainPem: testChain}, nil
}

func approvedCSR(name, request string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: "example.com/serving", Request: []byte(request)},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
			{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue},
		}},
	}
}

// TestRun wires the configuration, the mTLS client and the controller against an in-process
// server and a fake clientset: one CSR is signed, one refused and marked Failed.
func TestRun(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	ca := mtlstest.NewCA(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(ca.ServerTLS(t, "localhost"))))
	signetv1.RegisterSignerServiceServer(srv, refusingServer{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher")

	cfg := &Config{
		SignerNames: []string{"example.com/serving"},
		Server:      ServerConfig{Address: "localhost:" + port, CAFile: caFile, CertFile: certFile, KeyFile: keyFile},
	}
	kube := fake.NewClientset(approvedCSR("good", "ok"), approvedCSR("bad", "refuse"))
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, kube, logger) }()

	csrs := kube.CertificatesV1().CertificateSigningRequests()
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		good, err := csrs.Get(ctx, "good", metav1.GetOptions{})
		if err != nil || string(good.Status.Certificate) != testChain {
			return false, nil
		}
		bad, err := csrs.Get(ctx, "bad", metav1.GetOptions{})
		if err != nil || len(bad.Status.Conditions) != 2 {
			return false, nil
		}
		failed := bad.Status.Conditions[1]
		return failed.Type == certificatesv1.CertificateFailed && failed.Reason == "PolicyViolation" &&
			failed.Message == "requester may not use this signer", nil
	})
	if err != nil {
		t.Fatalf("CSRs not processed: %v", err)
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

func TestRunErrors(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := map[string]struct {
		cfg     *Config
		wantErr string
	}{
		"invalid configuration": {&Config{}, "signerNames: at least one"},
		"unreadable TLS files": {&Config{
			SignerNames: []string{"example.com/serving"},
			Server:      ServerConfig{Address: "localhost:1", CAFile: missing, CertFile: missing, KeyFile: missing},
		}, "reading server CA"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := Run(ctx, tt.cfg, fake.NewClientset(), logger)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

package watcher

import (
	"context"
	"io"
	"net"
	"net/http"
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
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/signet-pki/signet/internal/mtlstest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/watcher/internal/looptest"
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

// startServer runs the refusing server over mTLS and returns the watcher's server config.
func startServer(t *testing.T) ServerConfig {
	t.Helper()
	return startServerWith(t, refusingServer{})
}

// startServerWith serves service over mTLS and returns the watcher's server config.
func startServerWith(t *testing.T, service signetv1.SignerServiceServer) ServerConfig {
	t.Helper()
	ca := mtlstest.NewCA(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(ca.ServerTLS(t, "localhost"))))
	signetv1.RegisterSignerServiceServer(srv, service)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher")
	return ServerConfig{Address: "localhost:" + port, CAFile: caFile, CertFile: certFile, KeyFile: keyFile}
}

// freeAddress returns a loopback address with a port free a moment ago.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// get fetches url and returns the status code and body; 0 if the request failed.
func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestRunLeaderMetricsEvents runs the watcher as a deployment does, on a fake clientset:
// it takes the Lease in its namespace, signs, counts the outcome, records an Event from
// component signet-watcher in "default", serves /metrics, /livez and /readyz, and releases
// the Lease on cancel.
func TestRunLeaderMetricsEvents(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	enabled := true
	addr := freeAddress(t)
	cfg := &Config{
		SignerNames:    []string{"example.com/serving"},
		Server:         startServer(t),
		MetricsAddress: addr,
		SignedEvents:   SignedEventsAll,
		LeaderElection: LeaderElectionConfig{
			Enabled: &enabled, Namespace: "signet-test", Identity: "replica-a",
			LeaseDuration: metav1.Duration{Duration: 2 * time.Second},
			RenewDeadline: metav1.Duration{Duration: time.Second},
			RetryPeriod:   metav1.Duration{Duration: 200 * time.Millisecond},
		},
	}
	kube := looptest.NewClientset(approvedCSR("good", "ok"))
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, kube, logger) }()

	base := "http://" + addr
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		code, body := get(base + "/metrics")
		return code == http.StatusOK &&
			strings.Contains(body, "\nsignet_watcher_leader 1\n") &&
			strings.Contains(body, `signet_watcher_objects_handled_total{outcome="signed",signer="example.com/serving"} 1`), nil
	})
	if err != nil {
		_, body := get(base + "/metrics")
		t.Fatalf("leader never signed and counted it: %v\n%s", err, grepLines(body, "signet_watcher_"))
	}
	for _, path := range []string{"/livez", "/readyz"} {
		if code, body := get(base + path); code != http.StatusOK {
			t.Errorf("GET %s = %d %q, want 200", path, code, body)
		}
	}
	lease, err := kube.CoordinationV1().Leases("signet-test").Get(ctx, DefaultLeaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "replica-a" {
		t.Errorf("Lease signet-test/%s = %+v, %v; want held by replica-a", DefaultLeaseName, lease, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "good" && e.Source.Component == Component {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no Event on CSR good from %s in namespace default: %v", Component, err)
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
	lease, err = kube.CoordinationV1().Leases("signet-test").Get(context.Background(), DefaultLeaseName, metav1.GetOptions{})
	if err != nil || (lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "") {
		t.Errorf("Lease after stop = %+v, %v; want released", lease.Spec, err)
	}
	if code, _ := get(base + "/livez"); code != 0 {
		t.Errorf("GET /livez after Run returned = %d, want the listener closed", code)
	}
}

// TestRunStandbyIsReady: a replica that cannot get the Lease does not sign, reports
// leader 0, and is ready.
func TestRunStandbyIsReady(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	enabled := true
	addr := freeAddress(t)
	now := metav1.NewMicroTime(time.Now())
	holder, duration := "replica-a", int32(3600)
	kube := looptest.NewClientset(approvedCSR("good", "ok"), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "signet-test", Name: DefaultLeaseName},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &duration, AcquireTime: &now, RenewTime: &now},
	})
	t.Setenv("POD_NAMESPACE", "signet-test")
	t.Setenv("POD_NAME", "replica-b")
	cfg := &Config{
		SignerNames: []string{"example.com/serving"}, Server: startServer(t), MetricsAddress: addr,
		LeaderElection: LeaderElectionConfig{Enabled: &enabled},
	}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, kube, logger) }()

	base := "http://" + addr
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		code, body := get(base + "/metrics")
		return code == http.StatusOK && strings.Contains(body, "\nsignet_watcher_leader 0\n"), nil
	})
	if err != nil {
		t.Fatalf("standby never served metrics: %v", err)
	}
	if code, body := get(base + "/readyz"); code != http.StatusOK {
		t.Errorf("standby GET /readyz = %d %q, want 200", code, body)
	}
	time.Sleep(300 * time.Millisecond)
	if good, _ := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, "good", metav1.GetOptions{}); len(good.Status.Certificate) > 0 {
		t.Error("a standby signed a CSR")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestRun wires the configuration, the mTLS client and the controller against an in-process
// server and a fake clientset: one CSR is signed, one refused and marked Failed.
func TestRun(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	cfg := &Config{
		SignerNames: []string{"example.com/serving"},
		Server:      startServer(t),
	}
	kube := looptest.NewClientset(approvedCSR("good", "ok"), approvedCSR("bad", "refuse"))
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, kube, logger) }()

	csrs := kube.CertificatesV1().CertificateSigningRequests()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
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
	enabled := true
	t.Setenv("POD_NAMESPACE", "")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tests := map[string]struct {
		cfg     *Config
		wantErr string
	}{
		"invalid configuration": {&Config{}, "signerNames: at least one"},
		"unreadable TLS files": {&Config{
			SignerNames: []string{"example.com/serving"},
			Server:      ServerConfig{Address: "localhost:1", CAFile: missing, CertFile: missing, KeyFile: missing},
		}, "reading server CA"},
		"leader election without a namespace": {&Config{
			SignerNames:    []string{"example.com/serving"},
			Server:         ServerConfig{Address: "localhost:1", CAFile: missing, CertFile: missing, KeyFile: missing},
			LeaderElection: LeaderElectionConfig{Enabled: &enabled},
		}, "leader election namespace"},
		"metrics port taken": {&Config{
			SignerNames:    []string{"example.com/serving"},
			Server:         startServer(t),
			MetricsAddress: taken.Addr().String(),
		}, "metricsAddress"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := Run(ctx, tt.cfg, looptest.NewClientset(), logger)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

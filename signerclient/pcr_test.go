package signerclient

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/mtlstest"
	"github.com/signet-pki/signet/objectrequest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

func testPCRv1() *certificatesv1.PodCertificateRequest {
	maxSeconds := int32(7200)
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "req-x7", UID: "pcr-uid"},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: "example.com/pods",
			PodName:    "web-0", PodUID: "pod-uid",
			ServiceAccountName: "web", ServiceAccountUID: "sa-uid",
			NodeName: "node-1", NodeUID: "node-uid",
			MaxExpirationSeconds:      &maxSeconds,
			StubPKCS10Request:         []byte{0x30, 0x82, 0x01},
			UnverifiedUserAnnotations: map[string]string{"example.com/role": "frontend"},
		},
	}
}

// pcrServer answers SignPodCertificateRequest with respond and records the requests.
type pcrServer struct {
	signetv1.UnimplementedSignerServiceServer
	respond func(ctx context.Context) (*signetv1.SignPodCertificateRequestResponse, error)

	mu       sync.Mutex
	requests []*signetv1.SignPodCertificateRequestRequest
}

func (s *pcrServer) SignPodCertificateRequest(ctx context.Context, req *signetv1.SignPodCertificateRequestRequest) (*signetv1.SignPodCertificateRequestResponse, error) {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	return s.respond(ctx)
}

// newPCRClient serves srv over mTLS and returns a client of it with the given timeout.
func newPCRClient(t *testing.T, srv *pcrServer, timeout time.Duration) *Client {
	t.Helper()
	ca := mtlstest.NewCA(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(ca.ServerTLS(t, "localhost"))))
	signetv1.RegisterSignerServiceServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
	return newTestClient(t, Config{
		Address: net.JoinHostPort("localhost", port),
		CAFile:  caFile, CertFile: certFile, KeyFile: keyFile, RPCTimeout: timeout,
	})
}

func TestSignPCR(t *testing.T) {
	notBefore := time.Date(2026, 5, 4, 11, 59, 0, 0, time.UTC)
	notAfter, refresh := notBefore.Add(24*time.Hour), notBefore.Add(18*time.Hour)
	srv := &pcrServer{respond: func(context.Context) (*signetv1.SignPodCertificateRequestResponse, error) {
		return &signetv1.SignPodCertificateRequestResponse{
			CertificateChainPem: testChain, SerialNumber: "0f00",
			NotBefore: timestamppb.New(notBefore), NotAfter: timestamppb.New(notAfter), BeginRefreshAt: timestamppb.New(refresh),
		}, nil
	}}
	c := newPCRClient(t, srv, 5*time.Second)
	issued, err := c.SignPCR(context.Background(), objectrequest.PCRFromV1(testPCRv1()))
	if err != nil {
		t.Fatalf("SignPCR: %v", err)
	}
	want := Issued{Chain: []byte(testChain), Serial: "0f00", NotBefore: notBefore, NotAfter: notAfter, BeginRefreshAt: refresh}
	if string(issued.Chain) != string(want.Chain) || issued.Serial != want.Serial || !issued.NotBefore.Equal(notBefore) ||
		!issued.NotAfter.Equal(notAfter) || !issued.BeginRefreshAt.Equal(refresh) {
		t.Errorf("SignPCR() = %+v, want %+v", issued, want)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if want := objectrequest.PodRequest(objectrequest.PCRFromV1(testPCRv1())); len(srv.requests) != 1 || !proto.Equal(srv.requests[0], want) {
		t.Errorf("server got %v, want one %v", srv.requests, want)
	}
}

func TestSignPCRErrors(t *testing.T) {
	ts := timestamppb.New(time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC))
	tests := []struct {
		name         string
		respond      func(ctx context.Context) (*signetv1.SignPodCertificateRequestResponse, error)
		wantReason   string
		wantMessage  string
		wantTerminal bool
	}{
		{"unknown annotation", func(context.Context) (*signetv1.SignPodCertificateRequestResponse, error) {
			return nil, statusError(t, codes.InvalidArgument, `unverified user annotation "example.com/x" is not recognised`,
				&errdetails.ErrorInfo{Reason: "UNKNOWN_ANNOTATION", Domain: signetv1.ErrorDomain})
		}, "UnknownAnnotation", `unverified user annotation "example.com/x" is not recognised`, true},
		{"ledger unavailable", func(context.Context) (*signetv1.SignPodCertificateRequestResponse, error) {
			return nil, statusError(t, codes.Unavailable, "ledger is not writable",
				&errdetails.ErrorInfo{Reason: "LEDGER_UNAVAILABLE", Domain: signetv1.ErrorDomain})
		}, "LedgerUnavailable", "ledger is not writable", false},
		{"not implemented by the server", func(context.Context) (*signetv1.SignPodCertificateRequestResponse, error) {
			return nil, statusError(t, codes.Unimplemented, "method SignPodCertificateRequest not implemented", nil)
		}, ReasonSignerUnavailable, "method SignPodCertificateRequest not implemented", false},
		{"deadline", func(ctx context.Context) (*signetv1.SignPodCertificateRequestResponse, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, ReasonSignerUnavailable, "", false},
		{"empty chain", func(context.Context) (*signetv1.SignPodCertificateRequestResponse, error) {
			return &signetv1.SignPodCertificateRequestResponse{NotBefore: ts, NotAfter: ts, BeginRefreshAt: ts}, nil
		}, ReasonSignerUnavailable, "", false},
		{"no beginRefreshAt", func(context.Context) (*signetv1.SignPodCertificateRequestResponse, error) {
			return &signetv1.SignPodCertificateRequestResponse{CertificateChainPem: testChain, NotBefore: ts, NotAfter: ts}, nil
		}, ReasonSignerUnavailable, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newPCRClient(t, &pcrServer{respond: tt.respond}, 300*time.Millisecond)
			start := time.Now()
			_, err := c.SignPCR(context.Background(), objectrequest.PCRFromV1(testPCRv1()))
			if err == nil {
				t.Fatal("SignPCR succeeded, want an error")
			}
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("SignPCR took %s, want it bounded by the RPC timeout", elapsed)
			}
			reason, message, terminal := Classify(err)
			if reason != tt.wantReason || terminal != tt.wantTerminal || (tt.wantMessage != "" && message != tt.wantMessage) {
				t.Errorf("Classify(%v) = (%q, %q, %v), want (%q, %q, %v)", err, reason, message, terminal, tt.wantReason, tt.wantMessage, tt.wantTerminal)
			}
		})
	}
}

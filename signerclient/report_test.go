package signerclient

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// reportServer records ReportTrustBundle calls and answers with respond.
type reportServer struct {
	signetv1.UnimplementedSignerServiceServer
	respond func(ctx context.Context, req *signetv1.ReportTrustBundleRequest) error

	mu       sync.Mutex
	requests []*signetv1.ReportTrustBundleRequest
}

func (s *reportServer) ReportTrustBundle(ctx context.Context, req *signetv1.ReportTrustBundleRequest) (*signetv1.ReportTrustBundleResponse, error) {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	if err := s.respond(ctx, req); err != nil {
		return nil, err
	}
	return &signetv1.ReportTrustBundleResponse{}, nil
}

func TestReportTrustBundle(t *testing.T) {
	srv := &reportServer{respond: func(_ context.Context, req *signetv1.ReportTrustBundleRequest) error {
		if req.GetCluster() != "prod-eu" {
			return status.Error(codes.FailedPrecondition, `cluster "`+req.GetCluster()+`" is not among the signer's clusters`)
		}
		return nil
	}}
	c := startSignerService(t, srv, 5*time.Second)
	ctx := context.Background()
	fingerprints := []string{"aa", "bb"}
	if err := c.ReportTrustBundle(ctx, "example.com/serving", "prod-eu", "0123", fingerprints); err != nil {
		t.Fatalf("ReportTrustBundle: %v", err)
	}
	fingerprints[0] = "changed after the call"
	err := c.ReportTrustBundle(ctx, "example.com/serving", "elsewhere", "0123", nil)
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("ReportTrustBundle of a cluster not listed: err = %v, want the server's FailedPrecondition", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.requests) != 2 {
		t.Fatalf("server got %d requests, want 2", len(srv.requests))
	}
	got := srv.requests[0]
	if got.GetSignerName() != "example.com/serving" || got.GetCluster() != "prod-eu" || got.GetBundleHash() != "0123" ||
		!slices.Equal(got.GetAnchorFingerprints(), []string{"aa", "bb"}) {
		t.Errorf("request = %v", got)
	}
}

// TestReportTrustBundleErrors: an old server's Unimplemented and a server that does not
// answer within the RPC timeout come back as their gRPC codes.
func TestReportTrustBundleErrors(t *testing.T) {
	old := startSignerService(t, &anchorServer{}, 5*time.Second)
	if err := old.ReportTrustBundle(context.Background(), "example.com/serving", "default", "00", nil); status.Code(err) != codes.Unimplemented {
		t.Errorf("ReportTrustBundle to an older server: err = %v, want Unimplemented", err)
	}
	slow := startSignerService(t, &reportServer{respond: func(ctx context.Context, _ *signetv1.ReportTrustBundleRequest) error {
		<-ctx.Done()
		return ctx.Err()
	}}, 200*time.Millisecond)
	start := time.Now()
	err := slow.ReportTrustBundle(context.Background(), "example.com/serving", "default", "00", nil)
	if status.Code(err) != codes.DeadlineExceeded || time.Since(start) > 5*time.Second {
		t.Errorf("ReportTrustBundle to a server that does not answer: err = %v after %s, want DeadlineExceeded after the RPC timeout",
			err, time.Since(start))
	}
}

package signerclient

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/signet-pki/signet/internal/mtlstest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// anchorServer answers GetTrustAnchors from a map of signer name to PEM; an unknown signer
// gets NotFound.
type anchorServer struct {
	signetv1.UnimplementedSignerServiceServer
	anchors map[string]string
}

func (s *anchorServer) GetTrustAnchors(_ context.Context, req *signetv1.GetTrustAnchorsRequest) (*signetv1.GetTrustAnchorsResponse, error) {
	pem, ok := s.anchors[req.GetSignerName()]
	if !ok {
		return nil, status.Error(codes.NotFound, "unknown signer")
	}
	return &signetv1.GetTrustAnchorsResponse{TrustAnchorsPem: pem}, nil
}

func TestTrustAnchors(t *testing.T) {
	ca := mtlstest.NewCA(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(ca.ServerTLS(t, "localhost"))))
	signetv1.RegisterSignerServiceServer(g, &anchorServer{anchors: map[string]string{
		"example.com/serving": testChain,
		"example.com/empty":   "",
	}})
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
	c := newTestClient(t, Config{
		Address: net.JoinHostPort("localhost", port),
		CAFile:  caFile, CertFile: certFile, KeyFile: keyFile, RPCTimeout: 5 * time.Second,
	})

	got, err := c.TrustAnchors(context.Background(), "example.com/serving")
	if err != nil || string(got) != testChain {
		t.Errorf("TrustAnchors(example.com/serving) = %q, %v; want %q", got, err, testChain)
	}
	if _, err := c.TrustAnchors(context.Background(), "example.com/empty"); !errors.Is(err, errNoAnchors) {
		t.Errorf("TrustAnchors of an empty answer: err = %v, want errNoAnchors", err)
	}
	if _, err := c.TrustAnchors(context.Background(), "example.com/unknown"); status.Code(err) != codes.NotFound {
		t.Errorf("TrustAnchors of an unknown signer: err = %v, want the server's NotFound", err)
	}
}

package integration

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/signet-pki/signet/internal/devpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// holdingProxy is an mTLS SignerService in front of the real server that holds every sign call
// until the test releases it, so a test can change the CSR while its sign call is in flight.
type holdingProxy struct {
	signetv1.UnimplementedSignerServiceServer
	upstream signetv1.SignerServiceClient
	arrived  chan string   // object UID of each call that reached the proxy
	release  chan struct{} // one receive releases one call
	addr     string
}

// startHoldingProxy listens on a free loopback port with the server certificate of s's dev
// PKI and forwards released calls to s.addr. Point the watcher at proxy.addr.
func startHoldingProxy(t *testing.T, s *signet) *holdingProxy {
	t.Helper()
	p := &holdingProxy{arrived: make(chan string, 16), release: make(chan struct{})}
	state := func(name string) string { return filepath.Join(s.state, name) }
	serverCert, err := tls.LoadX509KeyPair(state(devpki.ServerCert), state("server.key"))
	if err != nil {
		t.Fatal(err)
	}
	clientTLS, err := devpki.ClientTLSConfig(s.state)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
	if err != nil {
		t.Fatal(err)
	}
	p.upstream = signetv1.NewSignerServiceClient(conn)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{serverCert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientTLS.RootCAs,
	})))
	signetv1.RegisterSignerServiceServer(srv, p)
	hs := health.NewServer()
	hs.SetServingStatus(signetv1.SignerService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	// A watcher of one signer follows that signer's health service, as signet-server serves it.
	hs.SetServingStatus(signetv1.SignerHealthService(s.signerName), healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = lis.Addr().String()
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); _ = conn.Close() })
	return p
}

// SignCertificateSigningRequest reports the call, waits for a release, then forwards it.
func (p *holdingProxy) SignCertificateSigningRequest(ctx context.Context, req *signetv1.SignCertificateSigningRequestRequest) (*signetv1.SignCertificateSigningRequestResponse, error) {
	p.arrived <- req.GetObject().GetUid()
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.upstream.SignCertificateSigningRequest(ctx, req)
}

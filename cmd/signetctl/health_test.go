package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/mtlstest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// testServer serves what register registers over mTLS on 127.0.0.1 and returns the connection
// flags of a client of it.
func testServer(t *testing.T, register func(*grpc.Server)) []string {
	t.Helper()
	ca := mtlstest.NewCA(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(ca.ServerTLS(t, "localhost"))))
	register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "client-1")
	return []string{"--server", lis.Addr().String(), "--tls-ca", caFile, "--tls-cert", certFile, "--tls-key", keyFile, "--timeout", "5s"}
}

// fakeSigners is a SignerService offering the signers named.
type fakeSigners struct {
	signetv1.UnimplementedSignerServiceServer
	names []string
}

func (f fakeSigners) ListSigners(context.Context, *signetv1.ListSignersRequest) (*signetv1.ListSignersResponse, error) {
	resp := &signetv1.ListSignersResponse{}
	for _, n := range f.names {
		resp.Signers = append(resp.Signers, &signetv1.SignerDescription{SignerName: n})
	}
	return resp, nil
}

func TestHealthOnRealServer(t *testing.T) {
	addr, dir := devServer(t)
	conn := []string{"--server", addr, "--dev-state-dir", dir}
	code, out, errOut := runCmd(append([]string{"health"}, conn...)...)
	want := "server " + addr + ": SERVING\n  " + devpki.DefaultSigner + ": SERVING\n"
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Errorf("health: exit %d, stdout %q, stderr %q; want exit 0 and %q…", code, out, errOut, want)
	}
	code, out, errOut = runCmd(append([]string{"health", "-o", "json", devpki.DefaultSigner}, conn...)...)
	var rep healthReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("health -o json: exit %d, %v, stderr %q\n%s", code, err, errOut, out)
	}
	if !rep.Healthy || rep.Overall.Status != "SERVING" || len(rep.Signers) != 1 || rep.Signers[0].Service != signetv1.SignerHealthService(devpki.DefaultSigner) {
		t.Errorf("report = %+v", rep)
	}
	// A signer the server does not offer: its health name would report the server's.
	code, out, _ = runCmd(append([]string{"health", "example.com/other"}, conn...)...)
	if code != 1 || !strings.Contains(out, "example.com/other: "+statusNotOffered) {
		t.Errorf("health of a signer not offered: exit %d, stdout %q", code, out)
	}
}

// TestHealthNotServing: a signer or the server not serving exits 1 and says which.
func TestHealthNotServing(t *testing.T) {
	hs := health.NewServer()
	conn := testServer(t, func(g *grpc.Server) {
		healthpb.RegisterHealthServer(g, hs)
		signetv1.RegisterSignerServiceServer(g, fakeSigners{names: []string{"example.com/a", "example.com/b"}})
	})
	hs.SetServingStatus(signetv1.HealthService, healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(signetv1.SignerHealthService("example.com/a"), healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(signetv1.SignerHealthService("example.com/b"), healthpb.HealthCheckResponse_NOT_SERVING)
	code, out, errOut := runCmd(append([]string{"health"}, conn...)...)
	if code != 1 || !strings.Contains(out, ": SERVING\n  example.com/a: SERVING\n  example.com/b: NOT_SERVING\n") || errOut != "" {
		t.Errorf("one signer down: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, _ = runCmd(append([]string{"health", "example.com/a"}, conn...)...); code != 0 {
		t.Errorf("health of the serving signer: exit %d, stdout %q", code, out)
	}
	hs.SetServingStatus(signetv1.HealthService, healthpb.HealthCheckResponse_NOT_SERVING)
	if code, out, _ = runCmd(append([]string{"health", "example.com/a"}, conn...)...); code != 1 || !strings.Contains(out, ": NOT_SERVING\n") {
		t.Errorf("server not serving: exit %d, stdout %q", code, out)
	}
	// A server without Signet's health names.
	conn = testServer(t, func(g *grpc.Server) {
		healthpb.RegisterHealthServer(g, health.NewServer())
		signetv1.RegisterSignerServiceServer(g, fakeSigners{})
	})
	if code, out, _ = runCmd(append([]string{"health"}, conn...)...); code != 1 || !strings.Contains(out, "SERVICE_UNKNOWN") {
		t.Errorf("unknown health service: exit %d, stdout %q", code, out)
	}
}

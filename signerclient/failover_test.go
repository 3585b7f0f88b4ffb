package signerclient

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"

	"github.com/signet-pki/signet/internal/mtlstest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// healthServer is one signing server of a fail-over test: a fakeServer that answers with its
// own name as the chain, and the health service, over mTLS, with the production server's
// keepalive enforcement.
type healthServer struct {
	name   string
	port   string
	grpc   *grpc.Server
	health *health.Server
}

func startHealthServer(t *testing.T, ca *mtlstest.CA, certName, name string) *healthServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	srv := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(ca.ServerTLS(t, certName))),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	signetv1.RegisterSignerServiceServer(srv, &fakeServer{respond: func(context.Context) (*signetv1.SignCertificateSigningRequestResponse, error) {
		return &signetv1.SignCertificateSigningRequestResponse{CertificateChainPem: name}, nil
	}})
	hs := health.NewServer()
	hs.SetServingStatus(signetv1.HealthService, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	return &healthServer{name: name, port: port, grpc: srv, health: hs}
}

// stop does what signet-server does on shutdown: health NOT_SERVING, then a graceful stop,
// forced after a grace period.
func (s *healthServer) stop(t *testing.T) {
	t.Helper()
	s.health.Shutdown()
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Logf("server %s: graceful stop timed out, forcing", s.name)
		s.grpc.Stop()
	}
}

// rpcLog records ObserveRPC calls.
type rpcLog struct {
	mu    sync.Mutex
	calls []observedRPC
}

type observedRPC struct {
	method string
	code   codes.Code
	d      time.Duration
}

func (l *rpcLog) observe(method string, code codes.Code, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, observedRPC{method, code, d})
}

func (l *rpcLog) snapshot() []observedRPC {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]observedRPC(nil), l.calls...)
}

// TestFailover runs two real servers with mTLS and the health service. Server A is named
// localhost, server B signet-b.test (reached as 127.0.0.1, its IP SAN), so each endpoint is
// verified under its own host. It proves: calls are spread over both; a server whose health
// turns NOT_SERVING is skipped and rejoins when SERVING again; a gracefully stopped server is
// skipped and calls keep succeeding on the other; with both stopped, calls fail transiently
// within the RPC timeout; ObserveRPC sees every call with its code.
func TestFailover(t *testing.T) {
	ca := mtlstest.NewCA(t)
	a := startHealthServer(t, ca, "localhost", "A")
	b := startHealthServer(t, ca, "signet-b.test", "B")
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
	log := &rpcLog{}
	addrA := net.JoinHostPort("localhost", a.port)
	c := newTestClient(t, Config{
		Address:   addrA,
		Addresses: []string{net.JoinHostPort("127.0.0.1", b.port), addrA},
		CAFile:    caFile, CertFile: certFile, KeyFile: keyFile,
		RPCTimeout: 2 * time.Second,
		ObserveRPC: log.observe,
	})
	calls := 0
	sign := func() (string, error) {
		t.Helper()
		calls++
		issued, err := c.SignCSR(context.Background(), testCSR())
		return string(issued.Chain), err
	}
	// eventually makes calls until want consecutive ones succeed on a server in servers, or
	// fails the test after a few seconds.
	eventually := func(what string, want int, servers ...string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		run := 0
		for run < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no %d consecutive calls served by %v within 5s", what, want, servers)
			}
			got, err := sign()
			switch {
			case err == nil && contains(servers, got):
				run++
			default:
				run = 0
				time.Sleep(20 * time.Millisecond)
			}
		}
	}

	// Both serving: calls succeed and both servers take some.
	seen := map[string]int{}
	deadline := time.Now().Add(5 * time.Second)
	for seen["A"] == 0 || seen["B"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("both servers running: calls served %v, want both A and B", seen)
		}
		got, err := sign()
		if err != nil {
			t.Fatalf("both servers running: SignCSR: %v", err)
		}
		seen[got]++
	}

	// A reports NOT_SERVING while still running: only B is used; then A rejoins.
	a.health.SetServingStatus(signetv1.HealthService, healthpb.HealthCheckResponse_NOT_SERVING)
	eventually("A not serving", 10, "B")
	a.health.SetServingStatus(signetv1.HealthService, healthpb.HealthCheckResponse_SERVING)
	eventually("A serving again", 1, "A")

	// B stops gracefully: A serves every call.
	b.stop(t)
	eventually("B stopped", 10, "A")

	// Both stopped: a transient error, bounded by the RPC timeout.
	a.stop(t)
	start := time.Now()
	_, err := sign()
	if err == nil {
		t.Fatal("both servers stopped: SignCSR succeeded")
	}
	if elapsed := time.Since(start); elapsed > 4*time.Second {
		t.Errorf("both servers stopped: SignCSR took %s, want it bounded by the RPC timeout", elapsed)
	}
	if reason, message, terminal := Classify(err); terminal || reason != ReasonSignerUnavailable {
		t.Errorf("both servers stopped: Classify(%v) = (%q, %q, %v), want transient %s", err, reason, message, terminal, ReasonSignerUnavailable)
	}

	observed := log.snapshot()
	if len(observed) != calls {
		t.Fatalf("ObserveRPC called %d times for %d calls", len(observed), calls)
	}
	for _, o := range observed {
		if o.method != "SignCertificateSigningRequest" {
			t.Errorf("ObserveRPC method = %q", o.method)
		}
	}
	if first, last := observed[0], observed[len(observed)-1]; first.code != codes.OK || last.code == codes.OK {
		t.Errorf("ObserveRPC codes: first %s, last %s; want OK then an error code", first.code, last.code)
	} else if last.code != codes.Unavailable && last.code != codes.DeadlineExceeded {
		t.Errorf("ObserveRPC last code = %s, want Unavailable or DeadlineExceeded", last.code)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestResolverAddresses(t *testing.T) {
	got, err := resolverAddresses(Config{
		Address:   "a.example:8443",
		Addresses: []string{"10.0.0.2:8443", "a.example:8443", "", "[::1]:9443"},
	})
	if err != nil {
		t.Fatalf("resolverAddresses: %v", err)
	}
	want := []resolver.Address{
		{Addr: "a.example:8443", ServerName: "a.example"},
		{Addr: "10.0.0.2:8443", ServerName: "10.0.0.2"},
		{Addr: "[::1]:9443", ServerName: "::1"},
	}
	if len(got) != len(want) {
		t.Fatalf("resolverAddresses = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Addr != want[i].Addr || got[i].ServerName != want[i].ServerName {
			t.Errorf("endpoint %d = %s (%s), want %s (%s)", i, got[i].Addr, got[i].ServerName, want[i].Addr, want[i].ServerName)
		}
	}

	got, err = resolverAddresses(Config{Addresses: []string{"10.0.0.1:8443", "10.0.0.2:8443"}, ServerName: "signet.example"})
	if err != nil {
		t.Fatalf("resolverAddresses with ServerName: %v", err)
	}
	for _, e := range got {
		if e.ServerName != "signet.example" {
			t.Errorf("endpoint %s server name = %q, want the configured signet.example", e.Addr, e.ServerName)
		}
	}

	for name, cfg := range map[string]Config{
		"none":        {},
		"empty":       {Addresses: []string{""}},
		"no port":     {Addresses: []string{"10.0.0.1:8443", "signet.example"}},
		"address bad": {Address: "signet.example"},
	} {
		if got, err := resolverAddresses(cfg); err == nil {
			t.Errorf("%s: resolverAddresses = %v, want an error", name, got)
		}
	}
}

// TestKeepaliveFitsServerPolicy pins the contract with the server's enforcement policy
// (MinTime 10s): pinging more often would get the connection closed with too_many_pings.
func TestKeepaliveFitsServerPolicy(t *testing.T) {
	if keepaliveTime < 10*time.Second {
		t.Errorf("keepalive time %s is below the server's MinTime of 10s", keepaliveTime)
	}
}

// TestCheckHealth: CheckHealth answers nil while the server serves the signing service, and an
// error naming the service once it reports NOT_SERVING.
func TestCheckHealth(t *testing.T) {
	ca := mtlstest.NewCA(t)
	s := startHealthServer(t, ca, "localhost", "a")
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
	c := newTestClient(t, Config{Address: net.JoinHostPort("localhost", s.port),
		CAFile: caFile, CertFile: certFile, KeyFile: keyFile, RPCTimeout: 2 * time.Second})
	if err := c.CheckHealth(context.Background()); err != nil {
		t.Fatalf("CheckHealth of a serving server: %v", err)
	}
	s.health.SetServingStatus(signetv1.HealthService, healthpb.HealthCheckResponse_NOT_SERVING)
	err := c.CheckHealth(context.Background())
	if err == nil || !strings.Contains(err.Error(), signetv1.HealthService) {
		t.Fatalf("CheckHealth of a NOT_SERVING server = %v, want an error naming %s", err, signetv1.HealthService)
	}
}

// TestFailoverOnSignerHealth: a client of one signer (HealthService set to the signer's
// service) stops using an endpoint whose signer reports NOT_SERVING (its CA key's HSM or TPM
// is unreachable there) while the server as a whole still serves, and uses it again once the
// signer is back.
func TestFailoverOnSignerHealth(t *testing.T) {
	ca := mtlstest.NewCA(t)
	a := startHealthServer(t, ca, "localhost", "A")
	b := startHealthServer(t, ca, "localhost", "B")
	service := signetv1.SignerHealthService("example.com/serving")
	for _, s := range []*healthServer{a, b} {
		s.health.SetServingStatus(service, healthpb.HealthCheckResponse_SERVING)
	}
	caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
	c := newTestClient(t, Config{
		Addresses: []string{net.JoinHostPort("localhost", a.port), net.JoinHostPort("localhost", b.port)},
		CAFile:    caFile, CertFile: certFile, KeyFile: keyFile,
		RPCTimeout:    2 * time.Second,
		HealthService: service,
	})
	servedBy := func(want string, n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for run := 0; run < n; {
			if time.Now().After(deadline) {
				t.Fatalf("no %d consecutive calls served by %s within 5s", n, want)
			}
			issued, err := c.SignCSR(context.Background(), testCSR())
			if err == nil && string(issued.Chain) == want {
				run++
				continue
			}
			run = 0
			time.Sleep(20 * time.Millisecond)
		}
	}
	a.health.SetServingStatus(service, healthpb.HealthCheckResponse_NOT_SERVING)
	servedBy("B", 10)
	a.health.SetServingStatus(service, healthpb.HealthCheckResponse_SERVING)
	b.health.SetServingStatus(service, healthpb.HealthCheckResponse_NOT_SERVING)
	servedBy("A", 10)
}

package signerclient

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/mtlstest"
	"github.com/signet-pki/signet/objectrequest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

const testChain = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

func testCSR() *certificatesv1.CertificateSigningRequest {
	seconds := int32(3600)
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1", UID: "0b6c1b3e-uid"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName:        "example.com/serving",
			Request:           []byte("-----BEGIN CERTIFICATE REQUEST-----\n..."),
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			ExpirationSeconds: &seconds,
			Username:          "system:node:n1",
			UID:               "user-uid",
			Groups:            []string{"system:nodes", "system:authenticated"},
			Extra:             map[string]certificatesv1.ExtraValue{"scopes": {"a", "b"}},
		},
	}
}

// fakeServer records requests and the client certificate's common name, and answers with
// respond.
type fakeServer struct {
	signetv1.UnimplementedSignerServiceServer
	respond func(ctx context.Context) (*signetv1.SignCertificateSigningRequestResponse, error)

	mu       sync.Mutex
	requests []*signetv1.SignCertificateSigningRequestRequest
	clientCN string
}

func (s *fakeServer) SignCertificateSigningRequest(ctx context.Context, req *signetv1.SignCertificateSigningRequestRequest) (*signetv1.SignCertificateSigningRequestResponse, error) {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
			s.clientCN = info.State.PeerCertificates[0].Subject.CommonName
		}
	}
	s.mu.Unlock()
	return s.respond(ctx)
}

// startServer serves fake over mTLS on a loopback port with a certificate for serverName and
// returns the port.
func startServer(t *testing.T, ca *mtlstest.CA, serverName string, fake *fakeServer) string {
	t.Helper()
	addr, _ := serve(t, "127.0.0.1:0", ca.ServerTLS(t, serverName), fake)
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// serve serves fake over TLS with cfg on addr ("127.0.0.1:0": any free port) until the test
// ends, and returns the address it listens on and a function that stops the server sooner.
func serve(t *testing.T, addr string, cfg *tls.Config, fake *fakeServer) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	signetv1.RegisterSignerServiceServer(srv, fake)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), srv.Stop
}

func newTestClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestSignCSROverMTLS(t *testing.T) {
	ca := mtlstest.NewCA(t)
	notAfter := time.Date(2026, 5, 5, 12, 0, 0, 0, time.UTC)
	fake := &fakeServer{respond: func(context.Context) (*signetv1.SignCertificateSigningRequestResponse, error) {
		return &signetv1.SignCertificateSigningRequestResponse{
			CertificateChainPem: testChain, SerialNumber: "01abc123", NotAfter: timestamppb.New(notAfter),
		}, nil
	}}
	tests := []struct {
		name, serverCertName, address, serverName string
	}{
		{"server name from address", "localhost", "localhost", ""},
		{"server name override", "signet.test", "127.0.0.1", "signet.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := startServer(t, ca, tt.serverCertName, fake)
			caFile, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
			c := newTestClient(t, Config{
				Address: net.JoinHostPort(tt.address, port), ServerName: tt.serverName,
				CAFile: caFile, CertFile: certFile, KeyFile: keyFile, RPCTimeout: 5 * time.Second,
			})
			issued, err := c.SignCSR(context.Background(), testCSR())
			if err != nil {
				t.Fatalf("SignCSR: %v", err)
			}
			if string(issued.Chain) != testChain {
				t.Errorf("chain = %q, want %q", issued.Chain, testChain)
			}
			if issued.Serial != "01abc123" || !issued.NotAfter.Equal(notAfter) {
				t.Errorf("serial, notAfter = %q, %s; want the server's 01abc123, %s", issued.Serial, issued.NotAfter, notAfter)
			}
			fake.mu.Lock()
			defer fake.mu.Unlock()
			if fake.clientCN != "watcher-1" {
				t.Errorf("server saw client %q, want watcher-1", fake.clientCN)
			}
			if last := fake.requests[len(fake.requests)-1]; !proto.Equal(last, objectrequest.CSR(testCSR())) {
				t.Errorf("server got %v", last)
			}
		})
	}
}

func TestSignCSRErrors(t *testing.T) {
	ca := mtlstest.NewCA(t)
	refusal, err := status.New(codes.InvalidArgument, "RSA-2048 is below the signer's minimum").
		WithDetails(&errdetails.ErrorInfo{Reason: "UNSUPPORTED_KEY", Domain: signetv1.ErrorDomain})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		respond      func(ctx context.Context) (*signetv1.SignCertificateSigningRequestResponse, error)
		wrongCA      bool
		wantReason   string
		wantTerminal bool
	}{
		{"terminal refusal", func(context.Context) (*signetv1.SignCertificateSigningRequestResponse, error) {
			return nil, refusal.Err()
		}, false, "UnsupportedKey", true},
		{"deadline", func(ctx context.Context) (*signetv1.SignCertificateSigningRequestResponse, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, false, ReasonSignerUnavailable, false},
		{"empty chain", func(context.Context) (*signetv1.SignCertificateSigningRequestResponse, error) {
			return &signetv1.SignCertificateSigningRequestResponse{}, nil
		}, false, ReasonSignerUnavailable, false},
		// Transient (a CA bundle fixed on disk cures it), but named.
		{"server not trusted", nil, true, "ServerCAUntrusted", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := startServer(t, ca, "localhost", &fakeServer{respond: tt.respond})
			clientCA := ca
			if tt.wrongCA {
				clientCA = mtlstest.NewCA(t)
			}
			dir := t.TempDir()
			caFile, _, _ := clientCA.ClientFiles(t, dir, "unused")
			_, certFile, keyFile := ca.ClientFiles(t, t.TempDir(), "watcher-1")
			c := newTestClient(t, Config{
				Address: net.JoinHostPort("localhost", port),
				CAFile:  caFile, CertFile: certFile, KeyFile: keyFile, RPCTimeout: 300 * time.Millisecond,
			})
			start := time.Now()
			_, err := c.SignCSR(context.Background(), testCSR())
			if err == nil {
				t.Fatal("SignCSR succeeded, want an error")
			}
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("SignCSR took %s, want it bounded by the RPC timeout", elapsed)
			}
			reason, message, terminal := Classify(err)
			if reason != tt.wantReason || terminal != tt.wantTerminal {
				t.Errorf("Classify(%v) = (%q, %q, %v), want (%q, _, %v)", err, reason, message, terminal, tt.wantReason, tt.wantTerminal)
			}
			if tt.wantTerminal && message != "RSA-2048 is below the signer's minimum" {
				t.Errorf("message = %q, want the server's", message)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	ca := mtlstest.NewCA(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := ca.ClientFiles(t, dir, "watcher-1")
	notPEM := filepath.Join(dir, "not.pem")
	mtlstest.WriteFile(t, notPEM, []byte("not PEM"))
	good := Config{Address: "localhost:8443", CAFile: caFile, CertFile: certFile, KeyFile: keyFile, RPCTimeout: time.Second}
	tests := map[string]func(c *Config){
		"zero timeout":      func(c *Config) { c.RPCTimeout = 0 },
		"missing CA":        func(c *Config) { c.CAFile = filepath.Join(dir, "missing.pem") },
		"CA not PEM":        func(c *Config) { c.CAFile = notPEM },
		"missing cert":      func(c *Config) { c.CertFile = filepath.Join(dir, "missing.pem") },
		"key of other cert": func(c *Config) { c.KeyFile = notPEM },
		"address no port":   func(c *Config) { c.Address = "localhost" },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := good
			mutate(&cfg)
			if c, err := New(cfg); err == nil {
				_ = c.Close()
				t.Fatal("New succeeded, want an error")
			}
		})
	}
	c, err := New(good)
	if err != nil {
		t.Fatalf("New(good): %v", err)
	}
	_ = c.Close()
}

func TestCertReloader(t *testing.T) {
	ca := mtlstest.NewCA(t)
	dir := t.TempDir()
	_, certFile, keyFile := ca.ClientFiles(t, dir, "first")
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r, err := newCertReloader(certFile, keyFile, clk, testLogger(t))
	if err != nil {
		t.Fatalf("newCertReloader: %v", err)
	}
	cn := func() string {
		t.Helper()
		cert, err := r.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil {
			t.Fatalf("GetClientCertificate: %v", err)
		}
		return cert.Leaf.Subject.CommonName
	}
	if got := cn(); got != "first" {
		t.Fatalf("CN = %q, want first", got)
	}

	// Rotate: a new pair with a later mtime.
	certPEM, keyPEM := ca.Issue(t, "second", false)
	mtlstest.WriteFile(t, certFile, certPEM)
	mtlstest.WriteFile(t, keyFile, keyPEM)
	later := time.Now().Add(time.Minute)
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := cn(); got != "first" {
		t.Errorf("CN before the reload interval = %q, want first", got)
	}
	clk.SetTime(clk.Now().Add(reloadInterval))
	if got := cn(); got != "second" {
		t.Errorf("CN after the reload interval = %q, want second", got)
	}

	// A half-written rotation (certificate without its key) keeps the previous pair.
	certPEM, _ = ca.Issue(t, "third", false)
	mtlstest.WriteFile(t, certFile, certPEM)
	evenLater := later.Add(time.Minute)
	if err := os.Chtimes(certFile, evenLater, evenLater); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(reloadInterval))
	if got := cn(); got != "second" {
		t.Errorf("CN after a mismatched rotation = %q, want second", got)
	}
}

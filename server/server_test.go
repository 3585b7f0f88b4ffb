package server_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/servertest"
)

// logBuffer collects the server's log output; the gRPC handlers write it concurrently.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) Contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Contains(b.buf.Bytes(), []byte(s))
}

// testServer is a signet-server serving a dev PKI on 127.0.0.1.
type testServer struct {
	addr string
	dir  string
	logs *logBuffer
	srv  *server.Server
}

// devConfig creates a dev PKI in a fresh folder, with the pod-identity signer as
// signet-server --dev makes it, and loads its configuration.
func devConfig(t *testing.T) (*config.Config, string) {
	t.Helper()
	return servertest.DevConfig(t, devpki.Options{PodIdentitySigner: devpki.DefaultPodIdentitySigner})
}

// startServer runs server.New and Serve in-process until the test ends. modify may change
// the dev configuration first.
func startServer(t *testing.T, modify func(*config.Config)) *testServer {
	t.Helper()
	cfg, dir := devConfig(t)
	if modify != nil {
		modify(cfg)
	}
	s, _ := runServer(t, cfg, dir)
	return s
}

// runServer runs server.New(cfg) and Serve in-process until stop is called or the test ends.
func runServer(t *testing.T, cfg *config.Config, dir string) (s *testServer, stop func()) {
	t.Helper()
	logs := &logBuffer{}
	r := servertest.Start(t, cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	return &testServer{addr: r.Addr, dir: dir, logs: logs, srv: r.Server}, r.Stop
}

// clientTLS trusts the dev TLS CA and presents certs (none if empty).
func (s *testServer) clientTLS(t *testing.T, certs ...tls.Certificate) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.read(t, devpki.TLSCACert)) {
		t.Fatal("no certificate in the TLS CA file")
	}
	return &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS13}
}

// devClient is the client certificate devpki made for the watcher.
func (s *testServer) devClient(t *testing.T) tls.Certificate {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(s.dir, devpki.ClientCert), filepath.Join(s.dir, devpki.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func (s *testServer) read(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// dial connects to the server with tlsConfig; the connection closes when the test ends.
func (s *testServer) dial(t *testing.T, tlsConfig *tls.Config) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func callContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// signRequest is a request for the dev signer with the usages of a serving certificate.
func signRequest(csrPEM []byte, uid string) *signetv1.SignCertificateSigningRequestRequest {
	return &signetv1.SignCertificateSigningRequestRequest{
		SignerName: devpki.DefaultSigner,
		Request:    csrPEM,
		Usages:     []string{"digital signature", "server auth"},
		Requester:  &signetv1.Requester{Username: "system:serviceaccount:default:web"},
		Object:     &signetv1.KubernetesObject{Uid: uid, Name: "csr-" + uid},
	}
}

// wantStatus fails t unless err is a status with code and an ErrorInfo of reason in the
// signet.dev domain.
func wantStatus(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.GetReason() != reason || info.GetDomain() != "signet.dev" {
				t.Fatalf("ErrorInfo = %s/%s, want %s/signet.dev", info.GetReason(), info.GetDomain(), reason)
			}
			return
		}
	}
	t.Fatalf("status %v carries no ErrorInfo", st)
}

func parsePEMCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		t.Fatalf("no certificate in %q", data)
	}
	return certs
}

func TestServerSigns(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	ctx := callContext(t)

	key := testpki.Key(t, testpki.P256)
	csrPEM := testpki.CSR(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "web"}, DNSNames: []string{"web.default.svc"}})
	resp, err := client.SignCertificateSigningRequest(ctx, signRequest(csrPEM, "uid-sign-ok"))
	if err != nil {
		t.Fatalf("SignCertificateSigningRequest: %v", err)
	}
	chain := parsePEMCerts(t, []byte(resp.GetCertificateChainPem()))
	leaf := chain[0]
	roots := x509.NewCertPool()
	roots.AddCert(parsePEMCerts(t, s.read(t, devpki.SignerCACert))[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "web.default.svc", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("issued certificate does not verify against the signer CA: %v", err)
	}
	if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
		t.Error("issued certificate is for another key")
	}
	serial, ok := new(big.Int).SetString(resp.GetSerialNumber(), 16)
	if !ok || serial.Cmp(leaf.SerialNumber) != 0 || strings.ToLower(resp.GetSerialNumber()) != resp.GetSerialNumber() {
		t.Errorf("serial_number = %q, want the leaf's %x in lower-case hexadecimal", resp.GetSerialNumber(), leaf.SerialNumber)
	}
	if !resp.GetNotBefore().AsTime().Equal(leaf.NotBefore) || !resp.GetNotAfter().AsTime().Equal(leaf.NotAfter) {
		t.Errorf("not_before/not_after = %s/%s, want the leaf's %s/%s", resp.GetNotBefore().AsTime(), resp.GetNotAfter().AsTime(), leaf.NotBefore, leaf.NotAfter)
	}
	if !s.logs.Contains(`"object_uid":"uid-sign-ok"`) || !s.logs.Contains(`"client":"signet-watcher"`) {
		t.Error("the issuance was not logged with the object UID and the client identity")
	}
}

func TestServerRefusals(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	p256 := testpki.Key(t, testpki.P256)
	unknownSigner := signRequest(testpki.CSR(t, p256, nil), "uid-unknown-signer")
	unknownSigner.SignerName = "example.com/not-served"
	tests := []struct {
		name   string
		req    *signetv1.SignCertificateSigningRequestRequest
		code   codes.Code
		reason string
	}{
		{"RSA-1024", signRequest(testpki.CSR(t, testpki.Key(t, testpki.RSA1024), nil), "uid-rsa1024"), codes.InvalidArgument, "UNSUPPORTED_KEY"},
		{"malformed PEM", signRequest([]byte("-----BEGIN CERTIFICATE REQUEST-----\nnot base64\n"), "uid-malformed"), codes.InvalidArgument, "MALFORMED_REQUEST"},
		{"broken signature", signRequest(testpki.BreakSignature(t, testpki.CSR(t, p256, nil)), "uid-badsig"), codes.InvalidArgument, "INVALID_SIGNATURE"},
		{"unknown signer", unknownSigner, codes.NotFound, "UNKNOWN_SIGNER"},
		{"CA:TRUE", signRequest(testpki.CARequestCSR(t, p256), "uid-ca"), codes.FailedPrecondition, "POLICY_VIOLATION"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := client.SignCertificateSigningRequest(callContext(t), tt.req)
			if resp != nil {
				t.Errorf("got a response %v with error %v", resp, err)
			}
			wantStatus(t, err, tt.code, tt.reason)
			if !s.logs.Contains(`"reason":"` + tt.reason + `"`) {
				t.Errorf("refusal %s not logged", tt.reason)
			}
		})
	}
}

func TestServerTrustAnchorsAndHealth(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	conn := s.dial(t, s.clientTLS(t, s.devClient(t)))
	ctx := callContext(t)

	resp, err := signetv1.NewSignerServiceClient(conn).GetTrustAnchors(ctx, &signetv1.GetTrustAnchorsRequest{SignerName: devpki.DefaultSigner})
	if err != nil {
		t.Fatalf("GetTrustAnchors: %v", err)
	}
	if got, want := parsePEMCerts(t, []byte(resp.GetTrustAnchorsPem())), parsePEMCerts(t, s.read(t, devpki.SignerCACert)); len(got) != 1 || !got[0].Equal(want[0]) {
		t.Errorf("trust anchors are not the signer CA certificate")
	}
	_, err = signetv1.NewSignerServiceClient(conn).GetTrustAnchors(ctx, &signetv1.GetTrustAnchorsRequest{SignerName: "example.com/not-served"})
	wantStatus(t, err, codes.NotFound, "UNKNOWN_SIGNER")

	health := healthpb.NewHealthClient(conn)
	for _, service := range []string{"", "signet.v1.SignerService"} {
		hr, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("health check %q: %v", service, err)
		}
		if hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q = %s, want SERVING", service, hr.GetStatus())
		}
	}
}

func TestServerReflection(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		t.Run(map[bool]string{false: "off by default", true: "on when configured"}[on], func(t *testing.T) {
			t.Parallel()
			s := startServer(t, func(c *config.Config) { c.GRPC.Reflection = on })
			conn := s.dial(t, s.clientTLS(t, s.devClient(t)))
			stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(callContext(t))
			if err != nil {
				t.Fatal(err)
			}
			// Send returns io.EOF when the server has already ended the stream (as it does
			// at once for an unregistered service); the status then comes from Recv.
			if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			resp, err := stream.Recv()
			if !on {
				if status.Code(err) != codes.Unimplemented {
					t.Fatalf("reflection answered %v, %v; want Unimplemented", resp, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("reflection: %v", err)
			}
			var names []string
			for _, svc := range resp.GetListServicesResponse().GetService() {
				names = append(names, svc.GetName())
			}
			if !strings.Contains(strings.Join(names, ","), "signet.v1.SignerService") {
				t.Errorf("reflection lists %v, want signet.v1.SignerService", names)
			}
		})
	}
}

// TestServerRequiresClientCertificate checks mTLS: a client without a certificate, with one
// from another CA, or with the TLS CA's server certificate (no client auth usage) cannot
// call the API, and its call never reaches the handler.
func TestServerRequiresClientCertificate(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	otherCA := testpki.CA(t)
	otherKey := testpki.Key(t, testpki.P256)
	otherCert := otherCA.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: devpki.ClientName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, otherKey.Public())
	serverCert, err := tls.LoadX509KeyPair(filepath.Join(s.dir, devpki.ServerCert), filepath.Join(s.dir, "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no client certificate", nil},
		{"certificate from another CA", []tls.Certificate{{Certificate: [][]byte{otherCert.Raw}, PrivateKey: otherKey}}},
		{"server certificate as client", []tls.Certificate{serverCert}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			uid := "uid-unauthenticated-" + string(rune('a'+i))
			client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, tt.certs...)))
			resp, err := client.SignCertificateSigningRequest(callContext(t), signRequest(testpki.CSR(t, testpki.Key(t, testpki.P256), nil), uid))
			if resp != nil || status.Code(err) != codes.Unavailable {
				t.Fatalf("call = %v, %v; want Unavailable", resp, err)
			}
			t.Logf("refused as expected: %v", err)
			if s.logs.Contains(uid) {
				t.Errorf("the handler saw the call of an unauthenticated client")
			}
		})
	}
}

func TestNewRefusesBrokenConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		modify  func(c *config.Config, dir string)
		wantMsg []string
	}{
		{"signer key does not match its certificate", func(c *config.Config, dir string) {
			c.Signers[0].Key = filepath.Join(dir, "tls-ca.key")
		}, []string{"tls-ca.key", devpki.SignerCACert, "does not match"}},
		{"the same CA configured twice", func(c *config.Config, dir string) {
			sg := &c.Signers[0]
			sg.CAs = []config.CA{
				{Key: sg.Key, Certificate: sg.Certificate, State: "active"},
				{Certificate: sg.Certificate, State: "retired"},
			}
			sg.Key, sg.Certificate = "", ""
		}, []string{devpki.DefaultSigner, "cas[0] (active", "cas[1] (retired", "the same certificate is configured twice"}},
		{"a retired anchor that is not a CA", func(c *config.Config, dir string) {
			sg := &c.Signers[0]
			sg.CAs = []config.CA{
				{Key: sg.Key, Certificate: sg.Certificate, State: "active"},
				{Certificate: filepath.Join(dir, devpki.ServerCert), State: "retired"},
			}
			sg.Key, sg.Certificate = "", ""
		}, []string{devpki.DefaultSigner, "cas[1] (retired", "not a CA certificate"}},
		{"signer certificate missing", func(c *config.Config, dir string) {
			c.Signers[0].Certificate = filepath.Join(dir, "missing.crt")
		}, []string{"missing.crt", devpki.DefaultSigner}},
		{"signer key URI without its PKCS#11 module", func(c *config.Config, dir string) {
			c.Signers[0].Key = "pkcs11:token=signet"
		}, []string{"module-path is missing", devpki.DefaultSigner}},
		{"signer key in a KMS Signet does not support", func(c *config.Config, dir string) {
			c.Signers[0].Key = "awskms:key-id=1234"
		}, []string{"unsupported key URI", "awskms"}},
		{"TLS key does not match the certificate", func(c *config.Config, dir string) {
			c.TLS.KeyFile = filepath.Join(dir, devpki.ClientKey)
		}, []string{devpki.ServerCert, devpki.ClientKey}},
		{"signer certificate file holding a chain", func(c *config.Config, dir string) {
			chain := filepath.Join(dir, "chain.crt")
			data := append(readFile(t, filepath.Join(dir, devpki.SignerCACert)), readFile(t, filepath.Join(dir, devpki.TLSCACert))...)
			if err := os.WriteFile(chain, data, 0o600); err != nil {
				t.Fatal(err)
			}
			c.Signers[0].Certificate = chain
		}, []string{"chain.crt holds 2 certificates", "intermediates"}},
		{"client CA file without certificates", func(c *config.Config, dir string) {
			c.TLS.ClientCAFile = filepath.Join(dir, devpki.ClientKey)
		}, []string{"client CA", "no CERTIFICATE block", devpki.ClientKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, dir := devConfig(t)
			tt.modify(cfg, dir)
			srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				srv.Close()
				t.Fatal("New accepted the configuration")
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

// TestServeStops checks Serve returns nil once its context ends, and returns the error at
// once when the listener fails.
func TestServeStops(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		stop    func(cancel context.CancelFunc, lis net.Listener)
		wantErr bool
	}{
		{"context cancelled", func(cancel context.CancelFunc, _ net.Listener) { cancel() }, false},
		{"listener closed", func(_ context.CancelFunc, lis net.Listener) { _ = lis.Close() }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A configuration (and ledger directory) each: the subtests run at the same time,
			// and a ledger admits one server.
			cfg, _ := devConfig(t)
			srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer srv.Close()
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, lis) }()
			tt.stop(cancel, lis)
			select {
			case err := <-served:
				if (err != nil) != tt.wantErr {
					t.Errorf("Serve = %v, want error: %t", err, tt.wantErr)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Serve did not return")
			}
		})
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestServerSignerWithSeveralCAs: a signer configured with cas issues with the active CA and
// publishes every CA's certificate in its trust anchors, active first.
func TestServerSignerWithSeveralCAs(t *testing.T) {
	t.Parallel()
	staged, retired := testpki.CA(t), testpki.CA(t)
	var stagedCert, stagedKey, retiredCert string
	s := startServer(t, func(cfg *config.Config) {
		dir := t.TempDir()
		write := func(name string, data []byte) string {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}
		stagedCert, stagedKey = write("staged.crt", staged.CertPEM()), write("staged.key", testpki.KeyPEM(t, staged.Key))
		retiredCert = write("retired.crt", retired.CertPEM())
		sc := &cfg.Signers[0]
		sc.CAs = []config.CA{
			{Key: sc.Key, Certificate: sc.Certificate},
			{Key: stagedKey, Certificate: stagedCert, State: "staged"},
			{Certificate: retiredCert, State: "retired"},
		}
		sc.Key, sc.Certificate = "", ""
	})
	conn := s.dial(t, s.clientTLS(t, s.devClient(t)))
	client := signetv1.NewSignerServiceClient(conn)
	resp, err := client.GetTrustAnchors(callContext(t), &signetv1.GetTrustAnchorsRequest{SignerName: devpki.DefaultSigner})
	if err != nil {
		t.Fatalf("GetTrustAnchors: %v", err)
	}
	active := parsePEMCerts(t, s.read(t, devpki.SignerCACert))[0]
	got := parsePEMCerts(t, []byte(resp.GetTrustAnchorsPem()))
	if len(got) != 3 || !got[0].Equal(active) || !got[1].Equal(staged.Cert) || !got[2].Equal(retired.Cert) {
		t.Fatalf("trust anchors hold %d certificates; want the active, staged and retired CAs in that order", len(got))
	}
	signed, err := client.SignCertificateSigningRequest(callContext(t), signRequest(testpki.CSR(t, testpki.Key(t, testpki.P256),
		&x509.CertificateRequest{Subject: pkix.Name{CommonName: "svc"}}), "uid-cas"))
	if err != nil {
		t.Fatalf("signing: %v", err)
	}
	if leaf := parsePEMCerts(t, []byte(signed.GetCertificateChainPem()))[0]; leaf.CheckSignatureFrom(active) != nil {
		t.Errorf("the leaf is not signed by the active CA")
	}
}

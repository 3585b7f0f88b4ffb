package integration

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/watcher"
)

// signet is one signing server (dev PKI in a temp folder) and, once started, a watcher.
type signet struct {
	t          *testing.T
	signerName string
	state      string
	addr       string
	caCert     *x509.Certificate
	cfg        *config.Config
}

// newSignet prepares the PKI and configuration of a server for signerName on a free loopback
// port, without starting anything.
func newSignet(t *testing.T, signerName string, maxLifetime time.Duration) *signet {
	t.Helper()
	s := &signet{t: t, signerName: signerName, state: t.TempDir(), addr: freeAddress(t)}
	path, err := devpki.Ensure(devpki.Options{Dir: s.state, SignerName: signerName, Address: s.addr})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg, err = config.Load(path); err != nil {
		t.Fatal(err)
	}
	s.cfg.Signers[0].MaxLifetime = &metav1.Duration{Duration: maxLifetime}
	s.cfg.HTTP.Address = "127.0.0.1:0"
	s.caCert = readCert(t, filepath.Join(s.state, devpki.SignerCACert))
	return s
}

// startServer runs the signing server until the test ends.
func (s *signet) startServer() { s.startStoppableServer() }

// startStoppableServer runs the signing server until the test ends or stop is called; stop
// waits until it has shut down and released its ledger, so it can be started again.
func (s *signet) startStoppableServer() (stop func()) {
	t := s.t
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, s.cfg, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(ctx, lis) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait(); srv.Close() }) }
	t.Cleanup(stop)
	return stop
}

// startWatcher runs a watcher for the signer, as a user with only the watcher's RBAC.
func (s *signet) startWatcher() {
	s.startWatcherAt(s.addr, 2*time.Second)
}

// startWatcherAt runs a watcher for the signer that calls the signing server at addr, as a
// user with the watcher's least-privilege RBAC (CSRs and PodCertificateRequests).
func (s *signet) startWatcherAt(addr string, rpcTimeout time.Duration) {
	t := s.t
	u, err := cluster.AddWatcher("watcher-"+strings.ReplaceAll(s.signerName, "/", "-"), []string{s.signerName})
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.watcherConfig(addr)
	cfg.RPCTimeout.Duration = rpcTimeout
	runWatcher(t, cfg, u.Client())
}

// watcherConfig is a defaulted watcher configuration for the signer and the server at addr.
func (s *signet) watcherConfig(addr string) *watcher.Config {
	cfg := &watcher.Config{
		SignerNames: []string{s.signerName},
		Server: watcher.ServerConfig{
			Address:  addr,
			CAFile:   filepath.Join(s.state, devpki.TLSCACert),
			CertFile: filepath.Join(s.state, devpki.ClientCert),
			KeyFile:  filepath.Join(s.state, devpki.ClientKey),
		},
		// Any free port, not the default :9465: the tests that run in parallel each have a
		// watcher, and the watcher pod on the test node serves 9465 on the host's network.
		MetricsAddress: "127.0.0.1:0",
	}
	cfg.Default()
	cfg.RPCTimeout.Duration = 2 * time.Second
	cfg.Backoff.Max.Duration = 2 * time.Second
	return cfg
}

// runWatcher runs watcher.Run with cfg until the test ends.
func runWatcher(t *testing.T, cfg *watcher.Config, kube kubernetes.Interface) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- watcher.Run(ctx, cfg, kube, logger) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("watcher.Run: %v", err)
		}
	})
}

// submit creates a CSR as the requester and returns it as stored. It fails the test on error,
// so it must be called from the test goroutine; other goroutines use trySubmit.
func submit(t *testing.T, u *controlplane.User, signerName string, key crypto.Signer, tmpl *x509.CertificateRequest, expiration *int32, usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	csr, err := trySubmit(u, signerName, key, tmpl, expiration, usages...)
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

// trySubmit is submit returning its error instead of failing the test.
func trySubmit(u *controlplane.User, signerName string, key crypto.Signer, tmpl *x509.CertificateRequest, expiration *int32, usages ...certificatesv1.KeyUsage) (*certificatesv1.CertificateSigningRequest, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, err
	}
	if len(usages) == 0 {
		usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	}
	csr, err := u.Client().CertificatesV1().CertificateSigningRequests().Create(context.Background(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        signerName,
			ExpirationSeconds: expiration,
			Usages:            usages,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating CSR: %w", err)
	}
	return csr, nil
}

// waitFor polls the CSR until done returns true, failing the test after timeout.
func waitFor(t *testing.T, kube kubernetes.Interface, name string, timeout time.Duration, what string, done func(*certificatesv1.CertificateSigningRequest) bool) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	var last *certificatesv1.CertificateSigningRequest
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		csr, err := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = csr
		return done(csr), nil
	})
	if err != nil {
		t.Fatalf("CSR %s: waiting until %s: %v; last status: %+v", name, what, err, last.Status)
	}
	return last
}

func signed(csr *certificatesv1.CertificateSigningRequest) bool {
	return len(csr.Status.Certificate) > 0
}

func condition(csr *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range csr.Status.Conditions {
		if csr.Status.Conditions[i].Type == typ {
			return &csr.Status.Conditions[i]
		}
	}
	return nil
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	certs := parseChain(t, mustRead(t, path))
	return certs[0]
}

func parseChain(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("parsing certificate: %v", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		t.Fatal("no certificate in PEM data")
	}
	return out
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// testWriter sends the server's log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

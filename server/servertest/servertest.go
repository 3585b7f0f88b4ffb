// Package servertest runs a signing server in-process for tests: a dev configuration
// (DevConfig) and server.New and Serve on a loopback listener, stopped when the test ends
// (Start).
package servertest

import (
	"context"
	"crypto"
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/config"
)

// DevConfig creates a dev PKI as signet-server --dev does, with opts (opts.Dir defaults to a
// fresh temporary folder), loads its configuration and moves the HTTP listener to a free
// loopback port, so that tests can run in parallel. It returns the configuration and the
// folder.
func DevConfig(t testing.TB, opts devpki.Options) (*config.Config, string) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	path, err := devpki.Ensure(opts)
	if err != nil {
		t.Fatalf("devpki.Ensure: %v", err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	cfg.HTTP.Address = "127.0.0.1:0"
	return cfg, opts.Dir
}

// Running is a server serving on Addr.
type Running struct {
	*server.Server
	// Addr is the gRPC address, host:port.
	Addr string
	// Stop stops the server (as its context ending does) and closes it; it is also called
	// when the test ends, and a second call does nothing.
	Stop func()
}

// Start runs server.New(cfg) with log and serves on 127.0.0.1 until Stop or the end of t.
// It fails the test if the server cannot start, and reports an error from Serve.
func Start(t testing.TB, cfg *config.Config, log *slog.Logger) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("server.New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
			srv.Close()
		})
	}
	t.Cleanup(stop)
	return &Running{Server: srv, Addr: lis.Addr().String(), Stop: stop}
}

// DevTLSCA is the TLS CA of the dev PKI in dir (DevConfig's), which issues the client
// certificates the server trusts: tests sign their own clients with it.
func DevTLSCA(t testing.TB, dir string) *testpki.Authority {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, devpki.TLSCACert), filepath.Join(dir, devpki.TLSCAKey))
	if err != nil {
		t.Fatal(err)
	}
	return &testpki.Authority{Cert: pair.Leaf, Key: pair.PrivateKey.(crypto.Signer)}
}

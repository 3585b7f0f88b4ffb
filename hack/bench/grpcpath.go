package main

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/keystore/pemfile"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/signerclient"
)

// grpcIssue runs the real signet-server in this process the way the binary runs it: server.New
// on a configuration file (the dev PKI for mutual TLS; ca as the only signer's CA, in a key
// file; the kube-apiserver-client profile; the lint gate on or off; the durable ledger and the
// idempotency store as configured by default), served on a loopback listener. sign signs a
// CSR object with a new UID through the watcher's own client (signerclient: mTLS, one
// connection shared by every caller, as the watcher's workers share theirs). echo is the
// anchor for what a call over gRPC costs by itself: a grpc.health.v1 Check of the signing
// service through the same client and connection (signerclient.CheckHealth).
func grpcIssue(ca *issuance.CA, csrPEM []byte, lintOn bool) (sign, echo func() error, cleanup func(), err error) {
	return grpcServe(csrPEM, func(dir string) (*config.Config, error) { return benchServerConfig(dir, ca, lintOn) })
}

// grpcServe is grpcIssue with the server's configuration made by configure, which writes
// what it needs (the dev PKI, the CA's files) into the server's temporary folder dir.
func grpcServe(csrPEM []byte, configure func(dir string) (*config.Config, error)) (sign, echo func() error, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "signet-bench-server-")
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		cancel()
		_ = os.RemoveAll(dir)
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	cfg, err := configure(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := server.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("starting signet-server: %w", err)
	}
	undo = append(undo, srv.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	undo = append(undo, func() {
		cancel()
		if err := <-served; err != nil {
			fmt.Fprintf(os.Stderr, "signet-server: %v\n", err)
		}
	})
	client, err := signerclient.New(signerclient.Config{
		Address: lis.Addr().String(), ServerName: "localhost", RPCTimeout: time.Minute,
		CAFile:   filepath.Join(dir, devpki.TLSCACert),
		CertFile: filepath.Join(dir, devpki.ClientCert), KeyFile: filepath.Join(dir, devpki.ClientKey),
	})
	if err != nil {
		return nil, nil, nil, err
	}
	undo = append(undo, func() { _ = client.Close() })
	var n atomic.Int64
	sign = func() error {
		uid := "bench-grpc-" + strconv.FormatInt(n.Add(1), 10)
		_, err := client.SignCSR(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				SignerName: signerName,
				Request:    csrPEM,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
				Username:   "bench",
			},
		})
		return err
	}
	echo = func() error { return client.CheckHealth(ctx) }
	return sign, echo, cleanup, nil
}

// benchServerConfig writes ca to a key file and a certificate file in dir and returns
// signerConfig for them.
func benchServerConfig(dir string, ca *issuance.CA, lintOn bool) (*config.Config, error) {
	keyPEM, err := pemfile.MarshalPrivateKeyPEM(ca.Key)
	if err != nil {
		return nil, err
	}
	keyFile, certFile := filepath.Join(dir, "bench-ca.key"), filepath.Join(dir, "bench-ca.crt")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Certificate.Raw}), 0o644); err != nil {
		return nil, err
	}
	return signerConfig(dir, keyFile, certFile, lintOn)
}

// signerConfig writes the dev PKI into dir and returns its configuration changed to serve
// signerName with the CA key keyURI (a file, or an HSM or TPM key) and its certificate in
// certFile, the kube-apiserver-client profile, the lint gate on or off, the metrics endpoint
// on any free port.
func signerConfig(dir, keyURI, certFile string, lintOn bool) (*config.Config, error) {
	path, err := devpki.Ensure(devpki.Options{Dir: dir, SignerName: signerName, Address: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	s := &cfg.Signers[0]
	s.Key, s.Certificate = keyURI, certFile
	s.Profile = profile.Spec{Name: profile.NameKubeAPIServerClient}
	s.MaxLifetime = &metav1.Duration{Duration: 24 * time.Hour}
	s.Lint = nil
	cfg.Lint.Disabled = !lintOn
	cfg.HTTP.Address = "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench server configuration: %w", err)
	}
	return cfg, nil
}

// Package server wires signet-server: it loads the signers' CAs, builds the mTLS gRPC server
// and serves the signet.v1 API until its context ends.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/signet-pki/signet/keystore"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/signerapi"
)

// maxRecvMsgSize bounds one request. A PKCS#10 request with a few SANs is a few KiB.
const maxRecvMsgSize = 256 << 10

// shutdownGrace is how long in-flight calls may run after the context ends.
const shutdownGrace = 10 * time.Second

// Server is a configured signet-server, ready to serve.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
	keys   []keystore.Key
	log    *slog.Logger
}

// New loads every signer's CA (refusing to start if a key does not match its certificate),
// the mTLS credentials, and builds the gRPC server. Close releases the keys.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Server, error) {
	s := &Server{log: log}
	var issuers []*issuance.Issuer
	for _, sc := range cfg.Signers {
		issuer, key, err := loadIssuer(ctx, sc)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.keys = append(s.keys, key)
		issuers = append(issuers, issuer)
		log.Info("signer loaded", "signer", sc.Name, "ca_subject", issuer.CACertificate().Subject.String(), "max_lifetime", maxLifetime(sc).String())
	}
	tlsConfig, err := serverTLS(cfg.TLS)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.grpc = grpc.NewServer(
		grpc.Creds(credentials.NewTLS(tlsConfig)),
		grpc.MaxRecvMsgSize(maxRecvMsgSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
	)
	signetv1.RegisterSignerServiceServer(s.grpc, signerapi.New(issuers, log))
	s.health = health.NewServer()
	s.health.SetServingStatus(signetv1.SignerService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	if cfg.GRPC.Reflection {
		reflection.Register(s.grpc)
		log.Warn("gRPC reflection is on")
	}
	return s, nil
}

// Serve serves gRPC on lis until ctx ends, then stops gracefully (in-flight calls get
// shutdownGrace to finish). It returns early, with the error, if serving fails (for example
// when lis is closed).
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	s.log.Info("serving gRPC", "address", lis.Addr().String())
	// Cancelled when grpc.Serve returns on its own, so the stopper below never waits forever.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		s.health.Shutdown()
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(shutdownGrace):
			s.grpc.Stop()
		}
	}()
	err := s.grpc.Serve(lis)
	cancel()
	<-done
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving gRPC: %w", err)
	}
	return nil
}

// Close releases the CA keys.
func (s *Server) Close() {
	for _, k := range s.keys {
		if err := k.Close(); err != nil {
			s.log.Warn("closing key", "error", err.Error())
		}
	}
}

// Run builds the server from cfg, listens on cfg.GRPC.Address and serves until ctx ends.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	s, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer s.Close()
	lis, err := net.Listen("tcp", cfg.GRPC.Address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.GRPC.Address, err)
	}
	return s.Serve(ctx, lis)
}

func loadIssuer(ctx context.Context, sc config.Signer) (*issuance.Issuer, keystore.Key, error) {
	certs, err := readCertificates(sc.Certificate)
	if err != nil {
		return nil, nil, fmt.Errorf("signer %s: %w", sc.Name, err)
	}
	if len(certs) != 1 {
		return nil, nil, fmt.Errorf("signer %s: %s holds %d certificates, want exactly the CA's (put the chain in intermediates)", sc.Name, sc.Certificate, len(certs))
	}
	ca := &issuance.CA{Certificate: certs[0]}
	if sc.Intermediates != "" {
		if ca.Intermediates, err = readCertificates(sc.Intermediates); err != nil {
			return nil, nil, fmt.Errorf("signer %s: %w", sc.Name, err)
		}
	}
	key, err := keystore.Open(ctx, sc.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("signer %s: %w", sc.Name, err)
	}
	ca.Key = key
	issuer, err := issuance.NewIssuer(issuance.IssuerOptions{
		SignerName: sc.Name,
		CA:         ca,
		Policy:     issuance.LeafPolicy{MaxLifetime: maxLifetime(sc)},
	})
	if err != nil {
		_ = key.Close()
		return nil, nil, fmt.Errorf("signer %s (key %s, certificate %s): %w", sc.Name, sc.Key, sc.Certificate, err)
	}
	return issuer, key, nil
}

// maxLifetime is the signer's maximum lifetime, or the default when the configuration was
// built without Default.
func maxLifetime(sc config.Signer) time.Duration {
	if sc.MaxLifetime == nil {
		return config.DefaultMaxLifetime
	}
	return sc.MaxLifetime.Duration
}

// readCertificates reads every CERTIFICATE block of a PEM file; there must be at least one.
func readCertificates(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading certificate file: %w", err)
	}
	var certs []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing certificate in %s: %w", path, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("no CERTIFICATE block in %s", path)
	}
	return certs, nil
}

// serverTLS builds a TLS 1.3 configuration that requires and verifies client certificates.
func serverTLS(c config.TLS) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS certificate %s and key %s: %w", c.CertFile, c.KeyFile, err)
	}
	caCerts, err := readCertificates(c.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("loading client CA: %w", err)
	}
	pool := x509.NewCertPool()
	for _, ca := range caCerts {
		pool.AddCert(ca)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}, nil
}

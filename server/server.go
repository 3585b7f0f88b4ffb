// Package server wires signet-server: it loads the signers' CAs, builds the mTLS gRPC server
// and serves the signet.v1 API until its context ends.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/signerapi"
)

// maxRecvMsgSize bounds one request. A PKCS#10 request with a few SANs is a few KiB.
const maxRecvMsgSize = 256 << 10

// shutdownGrace is how long in-flight calls may run after the context ends.
const shutdownGrace = 10 * time.Second

// Server is a configured signet-server, ready to serve.
type Server struct {
	cfg     *config.Config
	grpc    *grpc.Server
	health  *health.Server
	service *signerapi.Service
	tls     *tlsSource
	log     *slog.Logger

	mu      sync.Mutex // guards signers
	signers []*loadedSigner
}

// New loads every signer's CA (refusing to start if a key does not match its certificate),
// the mTLS credentials, and builds the gRPC server. Close releases the keys.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, log: log}
	for _, sc := range cfg.Signers {
		ls, err := loadSigner(ctx, sc)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.signers = append(s.signers, ls)
		log.Info("signer loaded", "signer", sc.Name, "ca_subject", ls.signer.Issuer.CACertificate().Subject.String(), "max_lifetime", maxLifetime(sc).String())
	}
	var err error
	if s.tls, err = newTLSSource(cfg.TLS); err != nil {
		s.Close()
		return nil, err
	}
	s.grpc = grpc.NewServer(
		grpc.Creds(credentials.NewTLS(s.tls.config())),
		grpc.MaxRecvMsgSize(maxRecvMsgSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
	)
	s.service = signerapi.New(s.currentSigners(), log)
	signetv1.RegisterSignerServiceServer(s.grpc, s.service)
	s.health = health.NewServer()
	s.health.SetServingStatus(signetv1.SignerService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	if cfg.GRPC.Reflection {
		reflection.Register(s.grpc)
		log.Warn("gRPC reflection is on")
	}
	return s, nil
}

func (s *Server) currentSigners() []*signerapi.Signer {
	out := make([]*signerapi.Signer, len(s.signers))
	for i, ls := range s.signers {
		out[i] = ls.signer
	}
	return out
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
	go s.reloadLoop(ctx)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ls := range s.signers {
		if err := ls.key.Close(); err != nil {
			s.log.Warn("closing key", "signer", ls.signer.Issuer.SignerName(), "error", err.Error())
		}
	}
	s.signers = nil
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

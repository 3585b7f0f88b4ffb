// Package server wires signet-server: it loads the signers' CAs, builds the mTLS gRPC server
// and serves the signet.v1 API until its context ends.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/signet-pki/signet/internal/httpserver"
	"github.com/signet-pki/signet/keystore"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/attest"
	"github.com/signet-pki/signet/server/checkpoint"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/guard"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/metrics"
	"github.com/signet-pki/signet/server/rotation"
	"github.com/signet-pki/signet/server/webhook"
)

// maxRecvMsgSize bounds one request. It sits above the largest object an apiserver can
// store (etcd's request limit, 1.5 MiB), so that a request forwarded from any object a cluster
// can hold reaches Signet, whose own limits (decision.MaxCSRBytes and the others, far lower)
// refuse it as MALFORMED_REQUEST with a reason and a ledger record. A message over this gets
// gRPC's own ResourceExhausted, which the watcher treats as final.
const maxRecvMsgSize = 4 << 20

// streamWorkers is how many goroutines serve calls and are kept between calls. A call that
// finds them all busy gets a goroutine of its own, as without workers. A kept goroutine keeps
// the stack its last call grew (a signing call grows a fresh 8 KiB stack several times), so
// calls stop paying for stack growth (measured in docs/benchmarks.md).
// grpc-go replaces each worker after 65,536 calls, which returns the stack's memory.
const streamWorkers = 64

// Flow-control windows, fixed. grpc-go's default dynamic window measures the connection's
// bandwidth-delay product with a PING exchange whenever data arrives and no measurement is
// under way; with small unary calls that is a PING each way on almost every call, frames and
// thread wake-ups on the critical path, for a window that never needs to grow: a request is a
// few KiB (at most Signet's limits, far below maxRecvMsgSize), an answer a few KiB. The
// watcher's client fixes its windows the same way.
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)

// shutdownGrace is how long in-flight calls may run after the context ends.
const shutdownGrace = 10 * time.Second

// Version and Commit are reported in the build-info metric (set by signet-server's main from
// internal/version).
var (
	Version = "dev"
	Commit  = ""
)

// ErrClosed is returned by Serve after Close, and is the readiness error of a closed Server.
var ErrClosed = errors.New("server closed")

// Server is a configured signet-server, ready to serve.
type Server struct {
	cfg     *config.Config
	grpc    *grpc.Server
	health  *health.Server
	http    *httpserver.Server
	httpLis net.Listener
	core    *decision.Core
	guard   *guard.Guard // contains the failures of every door
	tls     *tlsSource
	ledger  *ledger.Ledger // nil on a fleet
	fleet   *fleet         // state.backend postgres (fleet.go); nil on one host
	metrics *metrics.Metrics
	// checkpoints signs the ledger's checkpoints with checkpointKey (checkpoints.go); its
	// goroutine runs until checkpointsStop is closed.
	checkpoints                      atomic.Pointer[checkpoint.Checkpointer]
	checkpointKey                    keystore.Key
	checkpointsStop, checkpointsDone chan struct{}
	log                              *slog.Logger
	// rotation keeps each signer's CA set; its lock comes before mu.
	rotation *rotation.Manager

	mu      sync.Mutex // guards signers
	signers []*loadedSigner

	life    sync.Mutex     // orders serving.Add against Close's Wait
	serving sync.WaitGroup // Serve calls that have not returned
	// closing ends when Close begins: Serve refuses to start, every running Serve stops as
	// when its own context ends, and ready reports ErrClosed.
	closing   context.Context
	stopServe context.CancelFunc
	closeOnce sync.Once

	// webhook and webhookLis serve the HTTPS signing webhook; nil when it is off.
	webhook    *webhook.Server
	webhookLis net.Listener
	// attest verifies TPM evidence, and attestEndpoint serves its challenges on attestLis;
	// nil when attestation is off (attestation.go).
	attest         *attest.Service
	attestEndpoint *attest.Endpoint
	attestLis      net.Listener
}

// New loads every signer's CA and profile (refusing to start if a key does not match its
// certificate or a profile is invalid), opens the ledger (verifying its chain) and rebuilds
// the idempotency store from it, loads the mTLS credentials and the client rules, and builds
// the gRPC and HTTP servers. Close releases the keys and the ledger.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, log: log}
	s.closing, s.stopServe = context.WithCancel(context.Background())
	if err := s.build(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// buildWebhook builds the signing webhook when it is configured: the same decision core as
// gRPC, behind the same TLS source (server certificate, client CA, the client check, reloads)
// and the same refusal log.
func (s *Server) buildWebhook() error {
	wc := s.cfg.Webhook
	if !wc.Enabled() {
		return nil
	}
	var err error
	s.webhook, err = webhook.New(webhook.Options{Core: s.core, TLS: s.tls.config(), MaxRequestBytes: wc.MaxRequestBytes, Log: s.log,
		Metrics: s.metrics, HandshakeFailed: s.tls.refusals.handshakeFailed, Guard: s.guard})
	if err != nil {
		return err
	}
	if s.webhookLis, err = net.Listen("tcp", wc.Address); err != nil {
		return fmt.Errorf("listening on %s (webhook.address): %w", wc.Address, err)
	}
	return nil
}

// WebhookAddr is the address the signing webhook is served on, "" when it is off.
func (s *Server) WebhookAddr() string {
	if s.webhookLis == nil {
		return ""
	}
	return s.webhookLis.Addr().String()
}

// methodNames lists the full names of the methods of services.
func methodNames(services map[string]grpc.ServiceInfo) []string {
	var out []string
	for name, svc := range services {
		for _, m := range svc.Methods {
			out = append(out, "/"+name+"/"+m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// ServiceInfo lists the gRPC services the server registers and their methods, as
// grpc.Server.GetServiceInfo reports them: what a client can call.
func (s *Server) ServiceInfo() map[string]grpc.ServiceInfo { return s.grpc.GetServiceInfo() }

// HTTPAddr is the address /metrics, /livez and /readyz are served on.
func (s *Server) HTTPAddr() string { return s.httpLis.Addr().String() }

// healthLoop keeps the gRPC health status in step with readiness, every second: a server whose
// ledger refuses records reports NOT_SERVING, so clients fail over to another signing host.
// Each signer is also reported under its own service name (SignerHealthService), NOT_SERVING
// while its active CA key's HSM or TPM cannot be reached.
func (s *Server) healthLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	serving := true
	keys := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.ready()
		s.metrics.SetLedgerState(ledgerState(s.journalErr()))
		if s.ledger != nil {
			s.metrics.SetLedgerSpaceNeeded(s.ledger.SpaceNeeded())
			st := s.ledger.Stats()
			s.metrics.SetLedgerGrowth(st.ReadAtOpen, st.Segment, st.Unindexed)
		}
		s.updateSignerHealth(err, keys)
		if now := err == nil; now != serving {
			serving = now
			st := healthpb.HealthCheckResponse_SERVING
			if !serving {
				st = healthpb.HealthCheckResponse_NOT_SERVING
				s.log.Error("not serving: the ledger refuses records", "error", err.Error())
			}
			s.health.SetServingStatus("", st)
			s.health.SetServingStatus(signetv1.HealthService, st)
		}
	}
}

// ready is the /readyz check: the server is not closed and the ledger accepts records.
func (s *Server) ready() error {
	if s.closing.Err() != nil {
		return ErrClosed
	}
	if err := s.journalErr(); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// journalErr is why the ledger refuses records: the file ledger's, or the fleet's database's.
func (s *Server) journalErr() error {
	if s.fleet != nil {
		return s.fleet.Err()
	}
	return s.ledger.Err()
}

func (s *Server) currentSigners() []*decision.Signer {
	out := make([]*decision.Signer, len(s.signers))
	for i, ls := range s.signers {
		out[i] = ls.signer
	}
	return out
}

// Serve serves gRPC on lis until ctx ends or Close is called, then stops gracefully
// (in-flight calls get shutdownGrace to finish, then are cancelled) and returns nil once its
// background loops have ended. It returns early, with the error, if serving fails (for
// example when lis is closed). After Close it closes lis and returns ErrClosed.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	if err := s.beginServe(); err != nil {
		_ = lis.Close()
		return fmt.Errorf("serving gRPC on %s: %w", lis.Addr(), err)
	}
	defer s.serving.Done() // last: after the loops and the stopper have ended
	s.log.Info("serving gRPC", "address", lis.Addr().String())
	// Cancelled when grpc.Serve returns on its own, so the stopper below never waits forever,
	// and when Close begins.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
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
	// The background loops end with ctx and are waited for, so Close never races them.
	var loops sync.WaitGroup
	loops.Go(func() { s.reloadLoop(ctx) })
	loops.Go(func() { s.healthLoop(ctx) })
	defer loops.Wait()
	httpDone := make(chan error, 1)
	go func() { httpDone <- s.http.Serve(ctx, s.httpLis) }()
	webhookDone := make(chan error, 1)
	if s.webhook != nil {
		go func() { webhookDone <- s.webhook.Serve(ctx, s.webhookLis) }()
	} else {
		webhookDone <- nil
	}
	attestDone := make(chan error, 1)
	if s.attestEndpoint != nil {
		go func() { attestDone <- s.attestEndpoint.Serve(ctx, s.attestLis) }()
	} else {
		attestDone <- nil
	}
	err := s.grpc.Serve(lis)
	cancel()
	<-done
	httpErr := <-httpDone
	webhookErr := <-webhookDone // its handlers have returned: Close may release keys and ledger
	if attestErr := <-attestDone; attestErr != nil && !errors.Is(attestErr, http.ErrServerClosed) {
		s.log.Error("serving the attestation endpoint", "error", attestErr.Error())
	}
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving gRPC: %w", err)
	}
	if httpErr != nil {
		return fmt.Errorf("serving HTTP: %w", httpErr)
	}
	return webhookErr
}

// beginServe counts a Serve call in, unless Close has begun.
func (s *Server) beginServe() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closing.Err() != nil {
		return ErrClosed
	}
	s.serving.Add(1)
	return nil
}

// Close stops every running Serve as if its context had ended (in-flight calls get
// shutdownGrace), waits for it to return, then releases the CA keys and the ledger. Close
// may be called at any time and more than once; later calls wait for the first to finish.
// Serve after Close returns ErrClosed.
func (s *Server) Close() {
	s.closeOnce.Do(s.close)
}

func (s *Server) close() {
	s.life.Lock()
	s.stopServe()
	s.life.Unlock()
	s.serving.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpLis != nil {
		_ = s.httpLis.Close() // already closed when Serve ran
	}
	if s.attestLis != nil {
		_ = s.attestLis.Close() // already closed when Serve ran
	}
	if s.webhookLis != nil {
		_ = s.webhookLis.Close() // already closed when Serve ran
	}
	if s.fleet != nil { // after the doors: no call is left to record; before the checkpoint key
		s.fleet.close()
	}
	s.closeCheckpoints()
	if s.ledger != nil { // kept, closed: a late /readyz sees ErrClosed, a late append fails
		if err := s.ledger.Close(); err != nil {
			s.log.Warn("closing ledger", "error", err.Error())
		}
	}
	for _, ls := range s.signers {
		if err := ls.authority.Close(); err != nil {
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

package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/signet-pki/signet/internal/httpserver"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/guard"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/metrics"
	"github.com/signet-pki/signet/server/rotation"
	"github.com/signet-pki/signet/server/signerapi"
)

// build wires the server, in an order that matters: everything the configuration alone
// defines (profiles, lint gates, CA certificates, client rules, TLS files) is loaded before
// the state is opened, which creates the ledger's directory and the checkpoint key, so a start
// that fails on the configuration leaves nothing behind; then the state, the signers (whose
// CAs the recorded rotations choose), the decision core, and the front doors.
func (s *Server) build(ctx context.Context) error {
	names := make([]string, len(s.cfg.Signers))
	for i, sc := range s.cfg.Signers {
		names[i] = sc.Name
	}
	s.metrics = metrics.New(Version, Commit, names)
	s.rotation = rotation.New(rotation.Options{Log: s.log, Metrics: s.metrics})
	if err := s.newAttestation(); err != nil {
		return err
	}
	configured, err := configureSigners(s.cfg.Signers, s.cfg.Lint)
	if err != nil {
		return err
	}
	acc, err := s.buildAccess(names)
	if err != nil {
		return err
	}
	st, err := s.openState(ctx, configured)
	if err != nil {
		return err
	}
	if err := s.loadSigners(ctx, configured, st); err != nil {
		return err
	}
	s.tls.guard(acc.Authorizer.VerifyConnection, s.log, s.metrics)
	opts := decision.Options{Log: s.log, Ledger: st.journal, Store: st.answers, Metrics: s.metrics, Issued: s.rotation.Issued, Rotation: s.rotation}
	if s.attest != nil {
		opts.Attestor = s.attest
	}
	s.core = decision.New(s.currentSigners(), acc, opts)
	if err := s.buildDoors(names); err != nil {
		return err
	}
	if s.fleet != nil {
		s.fleet.start(s)
	}
	return nil
}

// buildAccess loads the client rules, the rate limits and the TLS files.
func (s *Server) buildAccess(names []string) (decision.Access, error) {
	authz, err := access.NewAuthorizer(s.cfg.Clients, names)
	if err != nil {
		return decision.Access{}, fmt.Errorf("clients: %w", err)
	}
	signerRates := map[string]access.Rate{}
	for _, sc := range s.cfg.Signers {
		if sc.RateLimit != nil {
			signerRates[sc.Name] = *sc.RateLimit
		}
	}
	limiter, err := access.NewLimiter(access.ClientRates(s.cfg.Clients), signerRates, nil)
	if err != nil {
		return decision.Access{}, fmt.Errorf("rate limits: %w", err)
	}
	if s.tls, err = newTLSSource(s.cfg.TLS); err != nil {
		return decision.Access{}, err
	}
	return decision.Access{Authorizer: authz, Limiter: limiter}, nil
}

// state is what openState opened: the journal and the answers, and, on a first start, the
// signers' plans (their keys opened before the ledger existed).
type state struct {
	journal    decision.Journal
	answers    decision.Answers
	firstStart bool
	plans      []rotation.Plan
}

// openState opens the ledger and its checkpoints, rebuilding the idempotency answers, the CA
// sets and the attestation bindings from the records the ledger reads, in the same read. On a
// first start (no ledger yet) the signers' keys are opened before the ledger is created, so
// that a key that does not open (an HSM that refuses its PIN) leaves nothing behind either.
func (s *Server) openState(ctx context.Context, configured []configuredSigner) (*state, error) {
	if s.cfg.State.Fleet() {
		return s.openFleet(ctx)
	}
	cfg, log := s.cfg, s.log
	_, statErr := os.Stat(cfg.Ledger.Dir)
	st := &state{firstStart: errors.Is(statErr, fs.ErrNotExist)}
	if st.firstStart {
		var err error
		if st.plans, err = s.openSigners(ctx, configured); err != nil {
			return nil, err
		}
	}
	answers := idempotency.New(idempotency.Options{Retention: cfg.Idempotency.Retention.Duration, ReplayUntil: decision.ReplayUntil})
	st.answers = answers
	since, replayed := time.Now().Add(-cfg.Idempotency.Retention.Duration), 0
	replay := func(r ledger.Record) error {
		if !r.Time.Before(since) {
			replayed += answers.Load(r)
		}
		if s.attest != nil {
			s.attest.Replay(r)
		}
		return s.rotation.Replay(r)
	}
	appended := func() {
		if cp := s.checkpoints.Load(); cp != nil {
			cp.Appended()
		}
	}
	lopts := ledger.Options{Logger: log, Replay: replay, ReplayFrom: since, Appended: appended, SegmentSize: cfg.Ledger.SegmentBytes()}
	var err error
	if s.ledger, err = ledger.Open(cfg.Ledger.Dir, lopts); err != nil {
		return nil, fmt.Errorf("opening ledger: %w", err)
	}
	if err := s.openCheckpoints(ctx); err != nil {
		return nil, err
	}
	seq, _ := s.ledger.Last()
	ls := s.ledger.Stats()
	s.metrics.SetLedgerGrowth(ls.ReadAtOpen, ls.Segment, ls.Unindexed)
	log.Info("ledger opened", "dir", cfg.Ledger.Dir, "last_seq", seq, "segment", ls.Segment, "idempotent_answers", replayed, "records_read", ls.ReadAtOpen)
	s.rotation.SetLedger(s.ledger)
	st.journal = s.ledger
	return st, nil
}

// loadSigners opens the signers' keys (unless openState did, on a first start) for the CA sets
// the ledger recorded, and adopts them.
func (s *Server) loadSigners(ctx context.Context, configured []configuredSigner, st *state) error {
	plans := st.plans
	if !st.firstStart {
		var err error
		if plans, err = s.openSigners(ctx, configured); err != nil {
			return err
		}
	}
	if err := s.adoptSigners(ctx, plans); err != nil {
		return err
	}
	s.rotation.SetInstaller(installer{s})
	s.metrics.WatchTLSCertificate(s.tls.certificate)
	return nil
}

// buildDoors builds the front doors on the decision core: the gRPC server and its services,
// health and reflection, the operational HTTP server, the attestation challenge endpoint and
// the signing webhook.
func (s *Server) buildDoors(names []string) error {
	cfg, log := s.cfg, s.log
	s.guard = guard.New(guard.Options{Log: log, Panicked: s.metrics.ObservePanic, Internal: signerapi.InternalStatus(),
		Malformed: signerapi.Undecodable(s.core)})
	s.grpc = grpc.NewServer(append(s.guard.ServerOptions(),
		grpc.Creds(s.tls.credentials()),
		grpc.ChainUnaryInterceptor(signerapi.ClientVersionCheck(Version, log, s.metrics.ObserveClientVersionRefused)), // the skew policy, docs/compatibility.md
		grpc.MaxRecvMsgSize(maxRecvMsgSize),
		// Stop (after shutdownGrace) waits for the handlers it cancels, so Close never
		// releases a key or the ledger under a call still running.
		grpc.WaitForHandlers(true),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.StaticStreamWindowSize(streamWindow),
		grpc.StaticConnWindowSize(connWindow),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
	)...)
	signetv1.RegisterSignerServiceServer(s.grpc, signerapi.New(s.core).WithBuild(signerapi.Build{Version: Version, Commit: Commit}))
	signetv1.RegisterAuthorityServiceServer(s.grpc, signerapi.NewAuthority(s.core))
	var proofs signerapi.Proofs = ledgerProofs{s.checkpoints.Load(), s.ledger}
	if s.fleet != nil {
		proofs = s.fleet.proofs
	}
	signetv1.RegisterLedgerServiceServer(s.grpc, signerapi.NewLedger(s.core).WithProofs(proofs))
	s.health = health.NewServer()
	s.health.SetServingStatus(signetv1.HealthService, healthpb.HealthCheckResponse_SERVING)
	s.updateSignerHealth(nil, map[string]bool{})
	healthpb.RegisterHealthServer(s.grpc, signerHealth{Server: s.health, served: func(name string) bool { return slices.Contains(names, name) }})
	if cfg.GRPC.Reflection {
		reflection.Register(s.grpc)
		log.Warn("gRPC reflection is on")
	}
	s.metrics.AddPanicMethods(methodNames(s.grpc.GetServiceInfo()))
	s.http = httpserver.New(cfg.HTTP.Address, s.metrics.Handler(), s.ready, log,
		s.guard.HTTP(metrics.PanicMethodHTTP, httpserver.InternalError))
	var err error
	if s.httpLis, err = net.Listen("tcp", cfg.HTTP.Address); err != nil {
		return fmt.Errorf("listening on %s (http.address): %w", cfg.HTTP.Address, err)
	}
	if err := s.buildAttestationEndpoint(); err != nil {
		return err
	}
	return s.buildWebhook()
}

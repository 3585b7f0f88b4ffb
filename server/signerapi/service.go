// Package signerapi implements the signet.v1 SignerService: it authorizes the mTLS client,
// applies rate limits and idempotency, runs the signer's issuance pipeline and records every
// decision in the ledger before a certificate leaves the server.
package signerapi

import (
	"context"
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"k8s.io/utils/clock"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/metrics"
	"github.com/signet-pki/signet/server/profile"
)

// Log keys used by the service.
const (
	logKeySigner       = "signer"
	logKeyClient       = "client"
	logKeyKind         = "kind"
	logKeyObjectUID    = "object_uid"
	logKeyObject       = "object"
	logKeyRequester    = "requester"
	logKeyOutcome      = "outcome"
	logKeySerial       = "serial"
	logKeyNotAfter     = "not_after"
	logKeyReason       = "reason"
	logKeyError        = "error"
	logKeyLedgerSeq    = "ledger_seq"
	logKeyLintFindings = "lint_findings"
	logKeyLint         = "lint"
)

// Signer is one served signer.
type Signer struct {
	// Issuer runs the signer's pipeline.
	Issuer *issuance.Issuer
	// Profile describes the signer's policy (ListSigners).
	Profile profile.Profile
	// Lint is the signer's lint gate, described by ListSigners; nil when the gate is off.
	Lint *lint.Gate
}

// Access is who may call which signer, and how fast. Either field may be nil: a nil
// Authorizer allows every authenticated client every signer (tests only), a nil Limiter
// limits nothing.
type Access struct {
	Authorizer *access.Authorizer
	Limiter    *access.Limiter
}

// Options are the collaborators of a Service. Ledger and Store are required for signing.
type Options struct {
	Log     *slog.Logger
	Ledger  *ledger.Ledger
	Store   *idempotency.Store
	Metrics *metrics.Metrics
	Clock   clock.PassiveClock
}

// Service serves SignerService. Its signers and access rules can be replaced at any time (hot
// reload): each call uses the ones current when it started.
type Service struct {
	signetv1.UnimplementedSignerServiceServer
	signers atomic.Pointer[map[string]*Signer]
	access  atomic.Pointer[Access]
	opts    Options
}

var _ signetv1.SignerServiceServer = (*Service)(nil)

// New returns a Service for the given signers and access rules.
func New(signers []*Signer, acc Access, opts Options) *Service {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	s := &Service{opts: opts}
	s.SetSigners(signers)
	s.SetAccess(acc)
	return s
}

// SetSigners replaces the served signers, keyed by their signer names.
func (s *Service) SetSigners(signers []*Signer) {
	m := make(map[string]*Signer, len(signers))
	for _, sg := range signers {
		m[sg.Issuer.SignerName()] = sg
	}
	s.signers.Store(&m)
}

// SetAccess replaces the authorization and rate-limit rules.
func (s *Service) SetAccess(acc Access) { s.access.Store(&acc) }

// signer returns the named signer of the current set.
func (s *Service) signer(name string) (*Signer, bool) {
	sg, ok := (*s.signers.Load())[name]
	return sg, ok
}

// allowed reports whether identity may use signerName.
func (s *Service) allowed(identity, signerName string) bool {
	a := s.access.Load().Authorizer
	return a == nil || a.Allowed(identity, signerName)
}

// ClientIdentity names the mTLS client of ctx (access.Identity of its verified certificate),
// or "" when there is none.
func ClientIdentity(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	tlsInfo, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(tlsInfo.State.VerifiedChains) == 0 || len(tlsInfo.State.VerifiedChains[0]) == 0 {
		return ""
	}
	return access.Identity(tlsInfo.State.VerifiedChains[0][0])
}

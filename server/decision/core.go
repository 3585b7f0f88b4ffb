// Package decision is Signet's decision core, behind every front door (the gRPC service and
// the HTTPS webhook): for one caller, identified by its mTLS identity, and one request,
// it applies the rate limits, the limits on what a caller may send, authorization,
// idempotency and the signer's issuance pipeline, records the decision in the ledger before a
// certificate leaves, and reports it in metrics and logs. It knows no transport: a refusal is
// an error that Classify turns into a Reason, which each front door maps to its own answer
// (server/wire: the gRPC code and the HTTP status).
package decision

import (
	"context"
	"log/slog"
	"sync/atomic"

	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/metrics"
	"github.com/signet-pki/signet/server/profile"
)

// Log keys used by the core.
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
	// TrustBundle is the PEM certificates of every CA of the signer (server/authority's
	// Bundle: active, staged, retired); nil means the issuing CA's certificate alone.
	TrustBundle []byte
	// Anchors are the CAs of TrustBundle, in its order.
	Anchors []authority.Entry
}

// Access is who may call which signer, and how fast. Either field may be nil: a nil
// Authorizer allows every authenticated client every signer (tests only), a nil Limiter
// limits nothing.
type Access struct {
	Authorizer *access.Authorizer
	Limiter    *access.Limiter
}

// Options are the collaborators of a Core. Ledger and Store are required for signing.
type Options struct {
	Log *slog.Logger
	// Ledger records every decision (fail closed: no record, no certificate).
	Ledger Journal
	// Store gives one answer per object and request.
	Store   Answers
	Metrics *metrics.Metrics
	Clock   clock.PassiveClock
	// Issued, if set, is called with every issued record once it is durable (the CA
	// rotation's account of each CA's last leaf).
	Issued func(ledger.Record)
	// Rotation, if set, serves trust bundle reports and the CA rotation steps.
	Rotation Rotation
	// Attestor verifies the TPM evidence of requests for attested signers; nil refuses them.
	Attestor Attestor
}

// Journal records every decision and finds the records of an object or a serial: the file
// ledger (server/ledger) on one host; a fleet's database (server/pgstate) for several.
type Journal interface {
	// Append stores r durably and returns it with its seq, time and hashes. An error means
	// the record was not acknowledged: the caller refuses what it would have recorded.
	Append(ctx context.Context, r ledger.Record) (ledger.Record, error)
	// Find returns the records of one object UID or of one certificate serial (give exactly
	// one), oldest first.
	Find(objectUID, serial string) ([]ledger.Record, error)
}

// Answers gives one answer per (scope, request hash): Do runs fn once for the first call and
// returns its entry to every call of the same scope and hash, concurrent or later, within
// the retention; a call of the same scope with another hash gets a conflict
// (idempotency.Store on one host; a fleet's database for several).
type Answers interface {
	// fn gets a context derived from ctx that carries what the journal needs to record the
	// answer with the issuance (a fleet's claim), and must record through it.
	Do(ctx context.Context, scope string, requestHash []byte, fn func(context.Context) (idempotency.Entry, error)) (idempotency.Entry, idempotency.Result, error)
}

// Core decides. Its signers and access rules can be replaced at any time (hot reload): each
// call uses the ones current when it started.
type Core struct {
	signers atomic.Pointer[map[string]*Signer]
	access  atomic.Pointer[Access]
	opts    Options
	fault   atomic.Pointer[func(point, objectUID string)] // SetFault
}

// FaultSign is the point of a signing call, inside the object's idempotent claim, just before
// its certificate is signed (SetFault).
const FaultSign = "sign"

// SetFault sets f, called at the named points of every signing call (FaultSign) with the
// call's object UID, so that a test can make the server fail there (panic, or block) and show
// that the failure is contained; nil removes it. Nothing in the server sets one.
func (c *Core) SetFault(f func(point, objectUID string)) {
	if f == nil {
		c.fault.Store(nil)
		return
	}
	c.fault.Store(&f)
}

// faultAt calls the fault function, if one is set, at point of the call about objectUID.
func (c *Core) faultAt(point, objectUID string) {
	if f := c.fault.Load(); f != nil {
		(*f)(point, objectUID)
	}
}

// New returns a Core for the given signers and access rules.
func New(signers []*Signer, acc Access, opts Options) *Core {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Core{opts: opts}
	c.SetSigners(signers)
	c.SetAccess(acc)
	return c
}

// SetSigners replaces the served signers, keyed by their signer names.
func (c *Core) SetSigners(signers []*Signer) {
	m := make(map[string]*Signer, len(signers))
	for _, sg := range signers {
		m[sg.Issuer.SignerName()] = sg
	}
	c.signers.Store(&m)
}

// SetAccess replaces the authorization and rate-limit rules.
func (c *Core) SetAccess(acc Access) { c.access.Store(&acc) }

// signer returns the named signer of the current set.
func (c *Core) signer(name string) (*Signer, bool) {
	sg, ok := (*c.signers.Load())[name]
	return sg, ok
}

// allowed reports whether identity may use signerName.
func (c *Core) allowed(identity, signerName string) bool {
	a := c.access.Load().Authorizer
	return a == nil || a.Allowed(identity, signerName)
}

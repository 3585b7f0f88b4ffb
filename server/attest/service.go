// Package attest is the signing server's side of TPM node attestation: the challenge
// endpoint a node agent calls before it builds its request (http.go), and the verification
// of the evidence a request for an attested signer carries (Verify: attestation.Verify, then
// the ticket's single use and the endorsement key's binding to the node, trust on first use).
// Its state sits behind State, so that a fleet of servers can share it.
package attest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/server/ledger/record"
)

// Defaults of Options.
const (
	DefaultChallengeTTL = time.Minute
	DefaultTicketTTL    = 5 * time.Minute
)

// Options configure a Service.
type Options struct {
	// Trust is what an EK must chain to or be listed in.
	Trust attestation.Trust
	// Boot is the boot-state policy; nil checks no boot state.
	Boot *attestation.BootPolicy
	// ChallengeTTL is how long a node has to activate a challenge (default 1m); TicketTTL how
	// long it has to use the ticket in a request (default 5m).
	ChallengeTTL, TicketTTL time.Duration
	// State keeps challenges, tickets and bindings; nil: NewMemoryState().
	State State
	// TicketKey seals and opens the tickets (at least 32 bytes); nil: a fresh key, so that no
	// ticket issued before a start verifies after it. A fleet's servers share one, so that a
	// ticket one of them issued verifies on the others.
	TicketKey []byte
	Clock     clock.PassiveClock
	Rand      io.Reader
	Log       *slog.Logger
}

// Service issues challenges and tickets and verifies evidence. It is safe for concurrent
// use.
type Service struct {
	opts      Options
	ticketKey []byte
}

// New returns a Service with a fresh ticket key: tickets issued before a restart do not
// verify after it, so spent tickets need not be remembered across restarts.
func New(opts Options) (*Service, error) {
	if opts.ChallengeTTL <= 0 {
		opts.ChallengeTTL = DefaultChallengeTTL
	}
	if opts.TicketTTL <= 0 {
		opts.TicketTTL = DefaultTicketTTL
	}
	if opts.State == nil {
		opts.State = NewMemoryState()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	key := opts.TicketKey
	switch {
	case key == nil:
		key = make([]byte, 32)
		if _, err := io.ReadFull(opts.Rand, key); err != nil {
			return nil, fmt.Errorf("making the attestation ticket key: %w", err)
		}
	case len(key) < 32:
		return nil, fmt.Errorf("the attestation ticket key has %d bytes, fewer than 32", len(key))
	}
	return &Service{opts: opts, ticketKey: key}, nil
}

// UseState makes s keep its state in st (a fleet's database, opened after s was built);
// call it before serving.
func (s *Service) UseState(st State) { s.opts.State = st }

// Challenge checks a node's keys (attestation.CheckKeys) and node name, and answers a
// credential challenge, remembered until it lapses.
func (s *Service) Challenge(req attestation.ChallengeRequest) (attestation.Challenge, *attestation.Keys, error) {
	now := s.opts.Clock.Now()
	if err := attestation.CheckNodeName(req.Node); err != nil {
		return attestation.Challenge{}, nil, err
	}
	keys, err := attestation.CheckKeys(req.EKCertificate, req.EKPublic, req.AKPublic, s.opts.Trust, now)
	if err != nil {
		return attestation.Challenge{}, nil, err
	}
	secret, ch, err := attestation.MakeChallenge(s.opts.Rand, keys)
	if err != nil {
		return attestation.Challenge{}, keys, err
	}
	id := make([]byte, 16)
	if _, err := io.ReadFull(s.opts.Rand, id); err != nil {
		return attestation.Challenge{}, keys, fmt.Errorf("making a challenge: %w", err)
	}
	ch.ID, ch.Expires = hex.EncodeToString(id), now.Add(s.opts.ChallengeTTL).Truncate(time.Second) // as a database keeps it
	p := Pending{Secret: secret, Keys: keys, Node: req.Node, Expires: ch.Expires}
	if p.Seal, err = s.seal(ch.ID, p); err != nil {
		return attestation.Challenge{}, keys, err
	}
	if err := s.opts.State.PutChallenge(ch.ID, p, now); err != nil {
		return attestation.Challenge{}, keys, err
	}
	return ch, keys, nil
}

// seal is the MAC of challenge id and p (its Seal aside) with the ticket key.
func (s *Service) seal(id string, p Pending) ([]byte, error) {
	keys, err := p.Keys.MarshalBinary()
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, s.ticketKey)
	for _, part := range [][]byte{[]byte("signet attestation challenge v1"), []byte(id), p.Secret, keys, []byte(p.Node),
		[]byte(p.Expires.UTC().Format(time.RFC3339Nano))} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		m.Write(n[:])
		m.Write(part)
	}
	return m.Sum(nil), nil
}

// Activate checks the secret a node decrypted against its challenge (taken once, right or
// wrong) and answers a ticket for the node and its keys.
func (s *Service) Activate(req attestation.ActivationRequest) (attestation.Activation, *attestation.Keys, error) {
	now := s.opts.Clock.Now()
	p, ok := s.opts.State.TakeChallenge(req.ID, now)
	if !ok {
		return attestation.Activation{}, nil, &attestation.Failure{Check: attestation.CheckChallenge,
			Detail: "no such challenge: it lapsed, was answered before, or was never issued (challenges live " + s.opts.ChallengeTTL.String() + "); ask for a new one"}
	}
	if want, err := s.seal(req.ID, p); err != nil || !hmac.Equal(want, p.Seal) {
		s.opts.Log.Error("a stored attestation challenge does not carry its seal: it was changed where it was kept (a fleet's database)", "challenge", req.ID, "node", p.Node)
		return attestation.Activation{}, nil, &attestation.Failure{Check: attestation.CheckChallenge,
			Detail: "the challenge was changed where the server kept it; ask for a new one"}
	}
	if subtle.ConstantTimeCompare(req.Secret, p.Secret) != 1 {
		return attestation.Activation{}, p.Keys, &attestation.Failure{Check: attestation.CheckChallenge,
			Detail: "the secret does not match: the credential was not decrypted by the TPM of this endorsement key with this attestation key loaded"}
	}
	t, err := attestation.NewTicket(s.opts.Rand, p.Keys, p.Node, now, s.opts.TicketTTL)
	if err != nil {
		return attestation.Activation{}, p.Keys, err
	}
	act := attestation.Activation{Ticket: t.Seal(s.ticketKey), Nonce: t.Nonce[:], Expires: t.Expires}
	if s.opts.Boot != nil {
		act.QuotePCRs = s.opts.Boot.PCRs
	}
	return act, p.Keys, nil
}

// Verify checks the evidence of a request for node: attestation.Verify, then the ticket's
// single use by holder (the request's idempotency scope and hash: a retry of the same request
// may present it again), then the endorsement key's binding (trust on first use: node bound
// to another EK, or the EK bound to another node, is refused). It returns the identity and
// whether the EK and node are bound yet: if not, the caller records the binding (a Bound
// ledger record) and then calls Bind.
func (s *Service) Verify(att *attestation.Attested, csr *x509.CertificateRequest, node, holder string) (attestation.NodeIdentity, bool, error) {
	return s.verify(att, csr, node, holder, true)
}

// Check is Verify without spending the ticket: what an approver asks before the request is
// signed. A ticket another request spent is refused all the same.
func (s *Service) Check(att *attestation.Attested, csr *x509.CertificateRequest, node, holder string) (attestation.NodeIdentity, bool, error) {
	return s.verify(att, csr, node, holder, false)
}

// spentTicket is the refusal of a ticket another request used.
var spentTicket = &attestation.Failure{Check: attestation.CheckTicketUsed,
	Detail: "the ticket was used by another request: evidence is single-use; attest again for a new request"}

func (s *Service) verify(att *attestation.Attested, csr *x509.CertificateRequest, node, holder string, spend bool) (attestation.NodeIdentity, bool, error) {
	now := s.opts.Clock.Now()
	id, err := attestation.Verify(att, csr, attestation.VerifyOptions{Trust: s.opts.Trust, TicketKey: s.ticketKey, Node: node, Now: now, Boot: s.opts.Boot})
	if err != nil {
		return id, false, err
	}
	if !spend {
		if s.opts.State.TicketSpent(id.Ticket, holder) {
			return id, false, spentTicket
		}
	} else if err := s.opts.State.SpendTicket(id.Ticket, id.TicketExpires, holder, now); err != nil {
		if errors.Is(err, ErrTicketSpent) {
			return id, false, spentTicket
		}
		return id, false, fmt.Errorf("spending the attestation ticket: %w", err)
	}
	ek, nodeBound := s.opts.State.Binding(node)
	if nodeBound && ek != id.EK {
		return id, false, &attestation.Failure{Check: attestation.CheckEKBinding, Detail: fmt.Sprintf(
			"node %q is bound to another endorsement key (%s), not %s: a node's TPM does not change; if it did (a replaced board), an operator must clear the binding first",
			node, ek, id.EK)}
	}
	other, ekBound := s.opts.State.NodeOf(id.EK)
	if ekBound && other != node {
		return id, false, &attestation.Failure{Check: attestation.CheckEKBinding, Detail: fmt.Sprintf(
			"endorsement key %s is bound to node %q: one TPM proves one node; an operator must clear that binding before this TPM joins as %q",
			id.EK, other, node)}
	}
	return id, nodeBound, nil
}

// Bind binds the EK to the node once its Bound record is durable (or replayed at start).
func (s *Service) Bind(node, ek string) error {
	if err := s.opts.State.Bind(node, ek); errors.Is(err, ErrBound) {
		return &attestation.Failure{Check: attestation.CheckEKBinding, Detail: fmt.Sprintf("node %q or endorsement key %s was bound to another meanwhile", node, ek)}
	} else if err != nil {
		return fmt.Errorf("binding node %q to endorsement key %s: %w", node, ek, err)
	}
	return nil
}

// Unbind removes a binding whose record could not be written.
func (s *Service) Unbind(node, ek string) { s.opts.State.Unbind(node, ek) }

// Binding returns the EK bound to node, if any.
func (s *Service) Binding(node string) (string, bool) { return s.opts.State.Binding(node) }

// Replay rebuilds the bindings from a ledger record read at start: a Bound record binds, an
// Unbound record clears.
func (s *Service) Replay(r record.Record) {
	switch r.Decision {
	case record.Bound:
		if err := s.opts.State.Bind(r.Node, r.EK); err != nil {
			s.opts.Log.Warn("ledger holds a conflicting attestation binding; the first one stands", "node", r.Node, "ek", r.EK, "ledger_seq", r.Seq)
		}
	case record.Unbound:
		s.opts.State.Unbind(r.Node, r.EK)
	}
}

package attest

import (
	"errors"
	"sync"
	"time"

	"github.com/signet-pki/signet/attestation"
)

// Pending is a challenge the server answered and the node has not activated yet.
type Pending struct {
	// Secret is the credential's secret, which the node must send back.
	Secret []byte
	// Keys are the node's checked EK and AK; Node the node name asked for.
	Keys *attestation.Keys
	Node string
	// Expires is when the challenge lapses.
	Expires time.Time
	// Seal is the service's MAC over the challenge (its id and all of the above), with the
	// ticket key: a challenge stored in a fleet's database and changed there (another EK or
	// AK, another node, a known secret) is refused at activation.
	Seal []byte
}

// State is what the attestation endpoint and the verification of requests keep between
// calls: pending challenges, spent tickets and the bindings of endorsement keys to node names.
// The server's embedded state is NewMemoryState, with the bindings rebuilt from the ledger at
// start; a fleet of servers shares one State through a database.
type State interface {
	// PutChallenge stores a pending challenge under id; ErrFull when too many are pending.
	PutChallenge(id string, p Pending, now time.Time) error
	// TakeChallenge removes and returns the pending challenge id, if it exists and has not
	// lapsed at now. A challenge is taken once, whatever the answer.
	TakeChallenge(id string, now time.Time) (Pending, bool)
	// SpendTicket records the single use of ticket id (valid until expires) by holder: the
	// idempotency scope and request hash of the request that carries it. Spending it again
	// for the same holder succeeds (a retry of the same request); for another holder it
	// returns ErrTicketSpent.
	SpendTicket(id string, expires time.Time, holder string, now time.Time) error
	// TicketSpent reports whether ticket id was spent by another holder than holder.
	TicketSpent(id, holder string) bool
	// Binding returns the EK bound to node, if any; NodeOf the node bound to ek.
	Binding(node string) (ek string, ok bool)
	NodeOf(ek string) (node string, ok bool)
	// Bind binds ek to node; ErrBound when either is bound to another.
	Bind(node, ek string) error
	// Unbind removes the binding of node to ek, if it is that one.
	Unbind(node, ek string)
}

// Errors of a State.
var (
	ErrFull        = errors.New("too many attestation challenges are pending")
	ErrTicketSpent = errors.New("the ticket was used before")
	ErrBound       = errors.New("bound to another")
)

// MaxPending bounds the challenges a memory state keeps: a node that asks and never answers
// costs an entry until its challenge lapses.
const MaxPending = 100_000

// memoryState is the embedded State: maps under one lock, lapsed entries dropped as new ones
// come.
type memoryState struct {
	mu         sync.Mutex
	challenges map[string]Pending
	tickets    map[string]spent
	nodeEK     map[string]string
	ekNode     map[string]string
	lastSweep  time.Time
}

type spent struct {
	holder  string
	expires time.Time
}

// NewMemoryState returns an empty in-memory State. Its challenges and spent tickets do not
// survive a restart, and need not: the ticket key is new at each start, so no ticket issued
// before a restart verifies after it.
func NewMemoryState() State {
	return &memoryState{challenges: map[string]Pending{}, tickets: map[string]spent{}, nodeEK: map[string]string{}, ekNode: map[string]string{}}
}

// sweep drops lapsed challenges and tickets, at most once a second.
func (m *memoryState) sweep(now time.Time) {
	if now.Sub(m.lastSweep) < time.Second && len(m.challenges) < MaxPending {
		return
	}
	m.lastSweep = now
	for id, p := range m.challenges {
		if !now.Before(p.Expires) {
			delete(m.challenges, id)
		}
	}
	for id, t := range m.tickets {
		if !now.Before(t.expires) {
			delete(m.tickets, id)
		}
	}
}

func (m *memoryState) PutChallenge(id string, p Pending, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	if len(m.challenges) >= MaxPending {
		return ErrFull
	}
	m.challenges[id] = p
	return nil
}

func (m *memoryState) TakeChallenge(id string, now time.Time) (Pending, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.challenges[id]
	delete(m.challenges, id)
	if !ok || !now.Before(p.Expires) {
		return Pending{}, false
	}
	return p, true
}

func (m *memoryState) SpendTicket(id string, expires time.Time, holder string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	if s, ok := m.tickets[id]; ok && s.holder != holder {
		return ErrTicketSpent
	}
	m.tickets[id] = spent{holder: holder, expires: expires}
	return nil
}

func (m *memoryState) TicketSpent(id, holder string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.tickets[id]
	return ok && s.holder != holder
}

func (m *memoryState) Binding(node string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ek, ok := m.nodeEK[node]
	return ek, ok
}

func (m *memoryState) NodeOf(ek string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	node, ok := m.ekNode[ek]
	return node, ok
}

func (m *memoryState) Bind(node, ek string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.nodeEK[node]; ok && cur != ek {
		return ErrBound
	}
	if cur, ok := m.ekNode[ek]; ok && cur != node {
		return ErrBound
	}
	m.nodeEK[node], m.ekNode[ek] = ek, node
	return nil
}

func (m *memoryState) Unbind(node, ek string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nodeEK[node] == ek {
		delete(m.nodeEK, node)
		delete(m.ekNode, ek)
	}
}

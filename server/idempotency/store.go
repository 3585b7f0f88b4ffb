package idempotency

import (
	"bytes"
	"container/list"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/server/ledger/record"
)

// Defaults of Options.
const (
	DefaultRetention  = 24 * time.Hour
	DefaultMaxEntries = 100_000
)

// ErrConflict: the object UID was already answered for a different request. The caller must
// refuse the request (an object's spec is immutable, so this is a forged or corrupted request).
var ErrConflict = errors.New("object UID already used with a different request")

// ErrUnavailable: the answers could not be read or written (a fleet's database, which keeps
// them, did not answer). Nothing was issued; a retry may succeed.
var ErrUnavailable = errors.New("the idempotent answers are unavailable")

// Result is the outcome of Lookup and Do.
type Result int

// The results of Lookup and Do.
const (
	// Miss: nothing is stored for the UID (Do: fn ran, and its result is returned).
	Miss Result = iota
	// Hit: the stored answer for the same UID and request hash is returned.
	Hit
	// Conflict: the UID is stored with a different request hash; see ErrConflict.
	Conflict
	// Reissued: the answer stored for the same UID and request hash is past its ReplayUntil,
	// so it is not returned (Lookup) and a new one is due (Do: fn ran, and its answer
	// replaced the stored one).
	Reissued
)

// String returns "miss", "hit", "conflict" or "reissued".
func (r Result) String() string {
	switch r {
	case Miss:
		return "miss"
	case Hit:
		return "hit"
	case Conflict:
		return "conflict"
	case Reissued:
		return "reissued"
	}
	return "unknown"
}

// Entry is the remembered answer to one request.
type Entry struct {
	// Scope and RequestHash identify the request: Scope is the client and object UID the
	// answer belongs to (see Scope), RequestHash the request's hash.
	Scope       string
	RequestHash []byte
	// Serial is the certificate's serial number in hex.
	Serial string
	// Chain is the issued chain in PEM, leaf first, exactly as first returned.
	Chain []byte
	// NotBefore and NotAfter are the certificate's validity.
	NotBefore, NotAfter time.Time
	// IssuedAt is when the certificate was issued; retention counts from it.
	IssuedAt time.Time
	// ReplayUntil, when set, ends the replay of the answer before retention does: from then
	// on the same request gets a new answer (see Reissued), which replaces this one, while a
	// different request for the UID is still a Conflict until retention ends. A pod
	// certificate uses it, because the kube-apiserver only takes one whose NotBefore is recent.
	ReplayUntil time.Time
	// LedgerSeq is the seq of the ledger record of the issuance.
	LedgerSeq uint64
}

func (e Entry) clone() Entry {
	e.RequestHash = bytes.Clone(e.RequestHash)
	e.Chain = bytes.Clone(e.Chain)
	return e
}

// Options configure a Store. The zero value is usable.
type Options struct {
	// Retention is how long an answer is kept after IssuedAt. Default: DefaultRetention.
	Retention time.Duration
	// MaxEntries bounds the store; when full, the oldest entry is evicted (counted in
	// Stats.Evicted: a retry after that would issue again). Default: DefaultMaxEntries.
	MaxEntries int
	// Clock tells the time. Default: the real clock.
	Clock clock.PassiveClock
	// ReplayUntil gives the ReplayUntil of an answer Load rebuilds from an issued record, so
	// replay windows survive a restart. Nil: every loaded answer is replayed until retention
	// ends.
	ReplayUntil func(record.Record) time.Time
}

// Stats count a Store's contents and drops.
type Stats struct {
	// Entries is the number of entries held.
	Entries int
	// Expired counts entries dropped after Retention.
	Expired uint64
	// Evicted counts entries dropped before Retention because the store was full.
	Evicted uint64
}

// Store remembers issued answers by scope (client and object UID, see Scope), in memory, for a retention window and up to a
// bounded size. It is safe for concurrent use.
type Store struct {
	opts     Options
	mu       sync.Mutex
	entries  map[string]*list.Element // of *Entry, by Scope
	order    *list.List               // *Entry by IssuedAt, oldest first
	inflight map[string]*call
	stats    Stats
}

// New returns an empty Store.
func New(opts Options) *Store {
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Store{opts: opts, entries: map[string]*list.Element{}, order: list.New(), inflight: map[string]*call{}}
}

// Lookup returns the answer stored for scope: Hit with a copy of the entry when the request
// hash matches and the entry is within its replay window, Reissued (and no entry) when it
// matches but the window is over, Conflict with the stored entry when the hash does not match,
// Miss when nothing (or only an expired entry) is stored.
func (s *Store) Lookup(scope string, requestHash []byte) (Entry, Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookupLocked(scope, requestHash)
}

func (s *Store) lookupLocked(scope string, requestHash []byte) (Entry, Result) {
	el, ok := s.entries[scope]
	if !ok {
		return Entry{}, Miss
	}
	e := el.Value.(*Entry)
	if s.expired(e) {
		s.drop(el)
		s.stats.Expired++
		return Entry{}, Miss
	}
	if !bytes.Equal(e.RequestHash, requestHash) {
		return e.clone(), Conflict
	}
	if !e.ReplayUntil.IsZero() && !s.opts.Clock.Now().Before(e.ReplayUntil) {
		return Entry{}, Reissued
	}
	return e.clone(), Hit
}

// Remember stores e (a copy), keyed by e.Scope. A zero IssuedAt means now. An entry that
// is already past retention is ignored, and so is one for a UID already stored: the first
// issuance wins, unless the stored answer is for the same request and past its ReplayUntil,
// which e then replaces.
func (s *Store) Remember(e Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rememberLocked(e)
}

// rememberLocked stores a copy of e and reports whether it did.
func (s *Store) rememberLocked(e Entry) bool {
	return s.keepLocked(e.clone())
}

// keepLocked stores e itself, whose slices the store may share but nobody may modify, and
// reports whether it did. Do's leader hands over its private copy this way, so the copying
// happens before the lock that every issuance takes.
func (s *Store) keepLocked(e Entry) bool {
	if e.IssuedAt.IsZero() {
		e.IssuedAt = s.opts.Clock.Now()
	}
	if s.expired(&e) {
		return false
	}
	switch _, res := s.lookupLocked(e.Scope, e.RequestHash); res {
	case Hit, Conflict:
		return false
	case Reissued:
		s.drop(s.entries[e.Scope])
	}
	s.sweep()
	for s.order.Len() >= s.opts.MaxEntries {
		s.drop(s.order.Front())
		s.stats.Evicted++
	}
	at := s.order.Back()
	for at != nil && at.Value.(*Entry).IssuedAt.After(e.IssuedAt) {
		at = at.Prev()
	}
	if at == nil {
		s.entries[e.Scope] = s.order.PushFront(&e)
	} else {
		s.entries[e.Scope] = s.order.InsertAfter(&e, at)
	}
	return true
}

// Scope is the idempotency scope of a request: the client identity that sent it and the object
// UID. Answers are never shared between clients: a tool that reuses an object UID cannot block
// the watcher's real object with it, nor replay another client's certificate.
func Scope(client, objectUID string) string {
	// The length prefix keeps every (client, UID) pair distinct, whatever the strings hold.
	return strconv.Itoa(len(client)) + ":" + client + "/" + objectUID
}

// Load remembers the Issued records among records that are still within retention (by their
// Time) and carry an object UID and a request hash, so answers survive a restart. A later
// record for the same request replaces an earlier one past its ReplayUntil (a reissue), as
// Remember does. Feed it the
// records of the last Retention, from ledger.Options.Replay when the server opens its ledger
// (or ledger.Replay). It returns how many it stored.
func (s *Store) Load(records ...record.Record) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range records {
		if r.Decision != record.Issued || r.ObjectUID == "" || r.Time.IsZero() {
			continue
		}
		h, err := hex.DecodeString(r.RequestHash)
		if err != nil || len(h) == 0 {
			continue
		}
		e := Entry{
			Scope: Scope(r.Client, r.ObjectUID), RequestHash: h, Serial: r.Serial, Chain: []byte(r.Certificate),
			NotBefore: r.NotBefore, NotAfter: r.NotAfter, IssuedAt: r.Time, LedgerSeq: r.Seq,
		}
		if s.opts.ReplayUntil != nil {
			e.ReplayUntil = s.opts.ReplayUntil(r)
		}
		if s.rememberLocked(e) {
			n++
		}
	}
	return n
}

// Stats returns the current counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep()
	st := s.stats
	st.Entries = s.order.Len()
	return st
}

func (s *Store) expired(e *Entry) bool {
	return s.opts.Clock.Since(e.IssuedAt) >= s.opts.Retention
}

// sweep drops expired entries from the old end.
func (s *Store) sweep() {
	for el := s.order.Front(); el != nil && s.expired(el.Value.(*Entry)); el = s.order.Front() {
		s.drop(el)
		s.stats.Expired++
	}
}

func (s *Store) drop(el *list.Element) {
	delete(s.entries, el.Value.(*Entry).Scope)
	s.order.Remove(el)
}

package pgstate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/server/idempotency"
)

// ErrClaimLost: the server no longer held the claim of the object it issued for (its lease
// ran out and another server took the claim over), so its issuance was not recorded and
// must not be answered.
var ErrClaimLost = errors.New("the claim on the object passed to another server")

// AnswersOptions tune Answers. The zero value is usable.
type AnswersOptions struct {
	// Lease is how long a claim holds before another server may take it over: longer than
	// an issuance takes (30 s when zero).
	Lease time.Duration
	// Retention is how long an answer is kept (idempotency.DefaultRetention when zero).
	Retention time.Duration
	// Poll is how often a server waiting on another's claim looks again (50 ms when zero).
	Poll time.Duration
	// Timeout bounds one transaction of claims (10 s when zero).
	Timeout time.Duration
	// Clock tells the time (the real clock when nil). Leases are the database's time.
	Clock clock.PassiveClock
}

// Answers gives one answer per scope across a fleet (decision.Answers): the answers table,
// claimed by INSERT … ON CONFLICT and taken over, once a claim's lease ran out, by
// compare-and-set on its fence. The claim travels in the context fn gets, and the Journal
// stores the answer with the issuance's record, in one transaction, only while the claim is
// still this server's.
type Answers struct {
	pool   *pgxpool.Pool
	holder string // this process's name in claims: a new random one at every start
	opts   AnswersOptions
	claims claimBatcher
}

// NewAnswers returns the answers of the database pool reaches (migrated by Migrate).
func NewAnswers(pool *pgxpool.Pool, opts AnswersOptions) (*Answers, error) {
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Retention <= 0 {
		opts.Retention = idempotency.DefaultRetention
	}
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("naming this server's claims: %w", err)
	}
	a := &Answers{pool: pool, holder: hex.EncodeToString(b), opts: opts}
	a.claims.a = a
	a.claims.group = group[*claimReq, int64]{max: maxClaimBatch, write: a.claims.insert}
	return a, nil
}

// Holder names this server's claims in the answers table (holder): the server logs it, so an
// operator can tell whose claim an object waits on.
func (a *Answers) Holder() string { return a.holder }

// claim is a claim this server holds.
type claim struct {
	scope  string
	holder string
	fence  int64
}

type claimKey struct{}

// claimOf returns the claim ctx carries, if any.
func claimOf(ctx context.Context) (claim, bool) {
	c, ok := ctx.Value(claimKey{}).(claim)
	return c, ok
}

// stored is an answers row.
type stored struct {
	hash    []byte
	fence   int64
	expired bool // the claim's lease ran out (no answer yet)
	entry   *idempotency.Entry
}

// Do returns the answer for (scope, requestHash) across the fleet, running fn to produce it
// only while this server holds the scope's claim; see idempotency.Store.Do for the results.
// A claim held by another server is waited for (polling, until ctx ends) and taken over once
// its lease has run out.
func (a *Answers) Do(ctx context.Context, scope string, requestHash []byte, fn func(context.Context) (idempotency.Entry, error)) (idempotency.Entry, idempotency.Result, error) {
	for {
		c, res, row, err := a.claimOrRead(ctx, scope, requestHash)
		if err != nil {
			return idempotency.Entry{}, idempotency.Miss, fmt.Errorf("answering for object %s: %w: %w: %w", scope, idempotency.ErrUnavailable, ErrUnavailable, err)
		}
		switch {
		case c != nil:
			return a.run(ctx, *c, requestHash, res, fn)
		case row != nil && row.entry != nil && res == idempotency.Conflict:
			return *row.entry, idempotency.Conflict, fmt.Errorf("object %s: %w", scope, idempotency.ErrConflict)
		case row != nil && row.entry != nil:
			return *row.entry, idempotency.Hit, nil
		}
		select { // another server's issuance is in flight
		case <-ctx.Done():
			return idempotency.Entry{}, idempotency.Miss, fmt.Errorf("waiting for the issuance in flight for object %s: %w", scope, ctx.Err())
		case <-time.After(a.opts.Poll):
		}
	}
}

// claimOrRead claims scope for this server (a new row, or a compare-and-set over an expired
// claim, an answer past its retention or, for the same request, past its replay window), or
// reads the answer or claim that stands.
func (a *Answers) claimOrRead(ctx context.Context, scope string, hash []byte) (*claim, idempotency.Result, *stored, error) {
	lease := a.opts.Lease.Seconds()
	fence, err := a.claims.claim(ctx, scope, hash)
	if err == nil && fence == 0 {
		err = pgx.ErrNoRows
	}
	if err == nil {
		return &claim{scope, a.holder, fence}, idempotency.Miss, nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil, err
	}
	row, err := a.read(ctx, scope)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil, nil // released meanwhile: try again
	}
	if err != nil {
		return nil, 0, nil, err
	}
	now := a.opts.Clock.Now()
	res := idempotency.Miss
	switch e := row.entry; {
	case e == nil && !row.expired:
		return nil, 0, row, nil // in flight elsewhere
	case e == nil:
	case now.After(e.IssuedAt.Add(a.opts.Retention)):
	case !bytes.Equal(row.hash, hash):
		return nil, idempotency.Conflict, row, nil
	case !e.ReplayUntil.IsZero() && now.After(e.ReplayUntil):
		res = idempotency.Reissued
	default:
		return nil, idempotency.Hit, row, nil
	}
	err = a.pool.QueryRow(ctx, `UPDATE answers SET request_hash = $2, holder = $3, fence = fence + 1,
			lease_until = now() + make_interval(secs => $4), chain = NULL, serial = NULL, not_before = NULL,
			not_after = NULL, issued_at = NULL, replay_until = NULL, record_seq = NULL
		WHERE scope = $1 AND fence = $5 RETURNING fence`, scope, hash, a.holder, lease, row.fence).Scan(&fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil, nil // another server moved first: read again
	}
	if err != nil {
		return nil, 0, nil, err
	}
	return &claim{scope, a.holder, fence}, res, nil, nil
}

// read reads scope's row.
func (a *Answers) read(ctx context.Context, scope string) (*stored, error) {
	var (
		row                                   stored
		chain                                 []byte
		serial                                *string
		notBefore, notAfter, issued, replayed *time.Time
		seq                                   *int64
	)
	err := a.pool.QueryRow(ctx, `SELECT request_hash, fence, coalesce(lease_until < now(), true), chain, serial,
			not_before, not_after, issued_at, replay_until, record_seq
		FROM answers WHERE scope = $1`, scope).Scan(&row.hash, &row.fence, &row.expired, &chain, &serial,
		&notBefore, &notAfter, &issued, &replayed, &seq)
	if err != nil {
		return nil, err
	}
	if chain != nil && seq != nil {
		e := idempotency.Entry{Scope: scope, RequestHash: row.hash, Chain: chain, LedgerSeq: uint64(*seq)}
		for _, f := range []struct {
			to   *time.Time
			from *time.Time
		}{{&e.NotBefore, notBefore}, {&e.NotAfter, notAfter}, {&e.IssuedAt, issued}, {&e.ReplayUntil, replayed}} {
			if f.from != nil {
				*f.to = f.from.UTC()
			}
		}
		if serial != nil {
			e.Serial = *serial
		}
		row.entry = &e
	}
	return &row, nil
}

// run runs fn under claim c. A failure releases the claim (another request may then be
// answered); a success's answer was stored by the journal with the record.
func (a *Answers) run(ctx context.Context, c claim, hash []byte, res idempotency.Result, fn func(context.Context) (idempotency.Entry, error)) (idempotency.Entry, idempotency.Result, error) {
	e, err := fn(context.WithValue(ctx, claimKey{}, c))
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		// Best effort: a claim left behind runs out with its lease.
		_, _ = a.pool.Exec(rctx, `DELETE FROM answers WHERE scope = $1 AND fence = $2 AND holder = $3 AND chain IS NULL`, c.scope, c.fence, c.holder)
		return idempotency.Entry{}, idempotency.Miss, err
	}
	e.Scope, e.RequestHash = c.scope, bytes.Clone(hash)
	return e, res, nil
}

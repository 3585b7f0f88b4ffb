package pgstate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/server/attest"
)

// AttestState is TPM attestation's state shared by a fleet (attest.State): the pending
// challenges, the spent tickets and the endorsement keys' bindings to nodes, in the
// attest_* tables. A challenge made on one server is activated on any, a ticket is spent once
// across the fleet, and an EK binds the node whichever server saw it first (unique
// constraints on both node and EK).
//
// The methods that answer a question without an error (TakeChallenge, TicketSpent, Binding,
// NodeOf, Unbind) fail safe when the database does not answer: no challenge (the node asks for
// a new one), not spent (the signing check, which spends, refuses then), not bound (binding,
// which inserts under the constraints, fails then, and is retried).
type AttestState struct {
	pool    *pgxpool.Pool
	timeout time.Duration

	mu        sync.Mutex
	lastSweep time.Time
}

// NewAttestState returns the attestation state of the database pool reaches.
func NewAttestState(pool *pgxpool.Pool) *AttestState {
	return &AttestState{pool: pool, timeout: 5 * time.Second}
}

var _ attest.State = (*AttestState)(nil)

func (s *AttestState) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout)
}

// sweep drops lapsed challenges and tickets, at most once a second per server.
func (s *AttestState) sweep(ctx context.Context, now time.Time) {
	s.mu.Lock()
	due := now.Sub(s.lastSweep) >= time.Second
	if due {
		s.lastSweep = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM attest_challenges WHERE expires <= $1`, now)
	b.Queue(`DELETE FROM attest_tickets WHERE expires <= $1`, now)
	_ = s.pool.SendBatch(ctx, b).Close() // best effort: lapsed rows are ignored anyway
}

// PutChallenge stores a pending challenge, unless attest.MaxPending have not lapsed yet.
func (s *AttestState) PutChallenge(id string, p attest.Pending, now time.Time) error {
	var keys []byte
	if p.Keys != nil {
		var err error
		if keys, err = p.Keys.MarshalBinary(); err != nil {
			return err
		}
	}
	ctx, cancel := s.ctx()
	defer cancel()
	s.sweep(ctx, now)
	tag, err := s.pool.Exec(ctx, `INSERT INTO attest_challenges (id, secret, keys, node, expires, seal)
		SELECT $1, $2, $3, $4, $5, $8 WHERE (SELECT count(*) FROM attest_challenges WHERE expires > $6) < $7`,
		id, p.Secret, keys, p.Node, p.Expires, now, attest.MaxPending, p.Seal)
	switch {
	case err != nil:
		return fmt.Errorf("storing an attestation challenge: %w: %w", ErrUnavailable, err)
	case tag.RowsAffected() == 0:
		return attest.ErrFull
	}
	return nil
}

// TakeChallenge removes and returns the challenge id, if it has not lapsed at now.
func (s *AttestState) TakeChallenge(id string, now time.Time) (attest.Pending, bool) {
	ctx, cancel := s.ctx()
	defer cancel()
	var p attest.Pending
	var keys []byte
	err := s.pool.QueryRow(ctx, `DELETE FROM attest_challenges WHERE id = $1 RETURNING secret, keys, node, expires, seal`, id).
		Scan(&p.Secret, &keys, &p.Node, &p.Expires, &p.Seal)
	if err != nil || !now.Before(p.Expires) {
		return attest.Pending{}, false
	}
	if keys != nil {
		if p.Keys, err = attestation.UnmarshalKeys(keys); err != nil {
			return attest.Pending{}, false
		}
	}
	return p, true
}

// SpendTicket records the single use of ticket id by holder; ErrTicketSpent if another holder
// spent it.
func (s *AttestState) SpendTicket(id string, expires time.Time, holder string, now time.Time) error {
	ctx, cancel := s.ctx()
	defer cancel()
	s.sweep(ctx, now)
	var by string
	err := s.pool.QueryRow(ctx, `INSERT INTO attest_tickets (id, holder, expires) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET holder = attest_tickets.holder RETURNING holder`, id, holder, expires).Scan(&by)
	switch {
	case err != nil:
		return fmt.Errorf("spending an attestation ticket: %w: %w", ErrUnavailable, err)
	case by != holder:
		return attest.ErrTicketSpent
	}
	return nil
}

// TicketSpent reports whether another holder than holder spent ticket id.
func (s *AttestState) TicketSpent(id, holder string) bool {
	ctx, cancel := s.ctx()
	defer cancel()
	var by string
	err := s.pool.QueryRow(ctx, `SELECT holder FROM attest_tickets WHERE id = $1`, id).Scan(&by)
	return err == nil && by != holder
}

// Binding returns the EK bound to node.
func (s *AttestState) Binding(node string) (string, bool) {
	return s.lookup(`SELECT ek FROM attest_bindings WHERE node = $1`, node)
}

// NodeOf returns the node ek is bound to.
func (s *AttestState) NodeOf(ek string) (string, bool) {
	return s.lookup(`SELECT node FROM attest_bindings WHERE ek = $1`, ek)
}

func (s *AttestState) lookup(query, key string) (string, bool) {
	ctx, cancel := s.ctx()
	defer cancel()
	var v string
	if err := s.pool.QueryRow(ctx, query, key).Scan(&v); err != nil {
		return "", false
	}
	return v, true
}

// Bind binds ek to node; ErrBound when either is bound to another.
func (s *AttestState) Bind(node, ek string) error {
	ctx, cancel := s.ctx()
	defer cancel()
	var gotNode, gotEK string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO attest_bindings (node, ek) VALUES ($1, $2) ON CONFLICT DO NOTHING`, node, ek); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT node, ek FROM attest_bindings WHERE node = $1 OR ek = $2`, node, ek)
		if err != nil {
			return err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			if err := rows.Scan(&gotNode, &gotEK); err != nil {
				return err
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n != 1 || gotNode != node || gotEK != ek {
			return attest.ErrBound
		}
		return nil
	})
	switch {
	case errors.Is(err, attest.ErrBound):
		return err
	case err != nil:
		return fmt.Errorf("binding node %q: %w: %w", node, ErrUnavailable, err)
	}
	return nil
}

// Unbind removes the binding of node to ek, if it is that one.
func (s *AttestState) Unbind(node, ek string) {
	ctx, cancel := s.ctx()
	defer cancel()
	_, _ = s.pool.Exec(ctx, `DELETE FROM attest_bindings WHERE node = $1 AND ek = $2`, node, ek)
}

package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// call is an issuance in progress for one UID.
type call struct {
	hash  []byte
	done  chan struct{}
	entry Entry // set before done is closed, when err is nil
	err   error
}

// Do returns the answer for (scope, requestHash), running fn to produce it at most once at
// a time per scope (see Scope: a client's object UID):
//
//   - a stored answer with the same hash, within its replay window: (entry, Hit, nil), fn does
//     not run; past its ReplayUntil, fn runs as below and its answer, returned with Reissued,
//     replaces the stored one;
//   - a stored answer with another hash: (stored entry, Conflict, error wrapping ErrConflict);
//   - an issuance for the UID already in flight: Do waits for it (or for ctx). With the same
//     hash it returns that issuance's answer as a Hit, or its error; with another hash it then
//     decides again (a Conflict if the first one succeeded). An error that wraps
//     context.Canceled or context.DeadlineExceeded is the first caller's own context ending,
//     not an answer: the waiter then decides again and may run fn itself;
//   - otherwise fn runs; on success its entry (Scope, RequestHash and a zero IssuedAt
//     filled in) is remembered and returned with Miss; its error is returned as is, and
//     nothing is remembered.
//
// fn runs with ctx (a fleet's store adds its claim to it, for the journal to check when it
// records the issuance); it should write the ledger record before returning the entry (no
// ledger record, no certificate). Returned entries are copies.
func (s *Store) Do(ctx context.Context, scope string, requestHash []byte, fn func(context.Context) (Entry, error)) (Entry, Result, error) {
	for {
		s.mu.Lock()
		e, res := s.lookupLocked(scope, requestHash)
		if res == Hit || res == Conflict {
			s.mu.Unlock()
			return e, res, resultError(scope, res)
		}
		c, busy := s.inflight[scope]
		if !busy {
			c = &call{hash: bytes.Clone(requestHash), done: make(chan struct{})}
			s.inflight[scope] = c
			s.mu.Unlock()
			return s.lead(ctx, scope, c, fn, res)
		}
		s.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return Entry{}, Miss, fmt.Errorf("waiting for the issuance in flight for object %s: %w", scope, ctx.Err())
		}
		if bytes.Equal(c.hash, requestHash) && !callerGone(c.err) {
			if c.err != nil {
				return Entry{}, Miss, c.err
			}
			return c.entry.clone(), Hit, nil
		}
	}
}

// lead runs fn for the call c it registered, remembers a success and releases the waiters,
// also when fn panics. A success is returned with res: Miss, or Reissued when fn replaces a
// stored answer past its replay window.
func (s *Store) lead(ctx context.Context, scope string, c *call, fn func(context.Context) (Entry, error), res Result) (Entry, Result, error) {
	finished := false
	defer func() {
		if !finished {
			c.err = fmt.Errorf("issuing for object %s: the issuance panicked", scope)
		}
		s.mu.Lock()
		if c.err == nil {
			// c.entry is the call's own copy and is only read from now on (waiters clone it).
			s.keepLocked(c.entry)
		}
		delete(s.inflight, scope)
		s.mu.Unlock()
		close(c.done)
	}()
	e, err := fn(ctx)
	finished = true
	if err != nil {
		c.err = err
		return Entry{}, Miss, err
	}
	e.Scope, e.RequestHash = scope, bytes.Clone(c.hash)
	if e.IssuedAt.IsZero() {
		e.IssuedAt = s.opts.Clock.Now()
	}
	c.entry = e.clone()
	return e, res, nil
}

// callerGone reports whether err is a leader's context ending rather than an outcome.
func callerGone(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func resultError(scope string, res Result) error {
	if res == Conflict {
		return fmt.Errorf("object %s: %w", scope, ErrConflict)
	}
	return nil
}

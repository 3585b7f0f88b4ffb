package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/idempotency"
)

// inFlight starts a Do for uid that blocks in fn until release is closed, and returns its
// result channel once fn is running.
func inFlight(s *idempotency.Store, uid, request string, fnErr error) (chan struct{}, chan error) {
	release, started, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := s.Do(context.Background(), uid, hashOf(request), func(context.Context) (idempotency.Entry, error) {
			close(started)
			<-release
			return entry(uid, request), fnErr
		})
		done <- err
	}()
	<-started
	return release, done
}

func TestDoSharesFailureThenRetries(t *testing.T) {
	t.Parallel()
	s, _ := newStore(idempotency.Options{})
	boom := errors.New("ledger unavailable")
	release, first := inFlight(s, "uid-1", "csr", boom)
	waiter := make(chan error, 1)
	go func() {
		_, _, err := s.Do(context.Background(), "uid-1", hashOf("csr"), func(context.Context) (idempotency.Entry, error) {
			t.Error("the waiter ran fn while the same request was in flight")
			return idempotency.Entry{}, nil
		})
		waiter <- err
	}()
	time.Sleep(10 * time.Millisecond)
	close(release)
	if err := <-first; !errors.Is(err, boom) {
		t.Errorf("leader: %v", err)
	}
	if err := <-waiter; !errors.Is(err, boom) {
		t.Errorf("waiter: %v, want the leader's error", err)
	}
	if _, res := s.Lookup("uid-1", hashOf("csr")); res != idempotency.Miss {
		t.Errorf("a failure was remembered: %v", res)
	}
	_, res, err := s.Do(context.Background(), "uid-1", hashOf("csr"), func(context.Context) (idempotency.Entry, error) {
		return entry("uid-1", "csr"), nil
	})
	if err != nil || res != idempotency.Miss {
		t.Errorf("retry after failure: %v, %v; want fn to run", res, err)
	}
}

// TestDoLeaderCallerGoneWaiterTakesOver: the first caller's context ends before its record
// was handed to the ledger; a waiter with the same request must not get that context error
// as its answer, but run the issuance itself.
func TestDoLeaderCallerGoneWaiterTakesOver(t *testing.T) {
	t.Parallel()
	s, _ := newStore(idempotency.Options{})
	gone := fmt.Errorf("appending to ledger: %w", context.Canceled)
	release, first := inFlight(s, "uid-1", "csr", gone)
	waiter := make(chan error, 1)
	ran := make(chan struct{}, 1)
	go func() {
		_, res, err := s.Do(context.Background(), "uid-1", hashOf("csr"), func(context.Context) (idempotency.Entry, error) {
			ran <- struct{}{}
			return entry("uid-1", "csr"), nil
		})
		if err == nil && res != idempotency.Miss {
			err = fmt.Errorf("result %v, want Miss (the waiter issued)", res)
		}
		waiter <- err
	}()
	time.Sleep(10 * time.Millisecond)
	close(release)
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("leader: %v", err)
	}
	if err := <-waiter; err != nil {
		t.Errorf("waiter: %v, want its own issuance", err)
	}
	select {
	case <-ran:
	default:
		t.Error("the waiter did not run the issuance")
	}
	if _, res := s.Lookup("uid-1", hashOf("csr")); res != idempotency.Hit {
		t.Errorf("the waiter's issuance was not remembered: %v", res)
	}
}

func TestDoOtherHashWaitsThenConflicts(t *testing.T) {
	t.Parallel()
	s, _ := newStore(idempotency.Options{})
	release, first := inFlight(s, "uid-1", "csr", nil)
	other := make(chan error, 1)
	go func() {
		_, _, err := s.Do(context.Background(), "uid-1", hashOf("forged"), func(context.Context) (idempotency.Entry, error) {
			t.Error("fn ran for a conflicting request")
			return idempotency.Entry{}, nil
		})
		other <- err
	}()
	time.Sleep(10 * time.Millisecond)
	select {
	case err := <-other:
		t.Fatalf("the conflicting request did not wait: %v", err)
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-other; !errors.Is(err, idempotency.ErrConflict) {
		t.Errorf("conflicting request: %v, want ErrConflict", err)
	}
}

func TestDoWaitHonoursContext(t *testing.T) {
	t.Parallel()
	s, _ := newStore(idempotency.Options{})
	release, first := inFlight(s, "uid-1", "csr", nil)
	defer func() { close(release); <-first }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, _, err := s.Do(ctx, "uid-1", hashOf("csr"), func(context.Context) (idempotency.Entry, error) {
		t.Error("fn ran while the request was in flight")
		return idempotency.Entry{}, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want DeadlineExceeded", err)
	}
}

func TestDoPanicReleasesWaiters(t *testing.T) {
	t.Parallel()
	s, _ := newStore(idempotency.Options{})
	started, release := make(chan struct{}), make(chan struct{})
	go func() {
		defer func() { recover() }()
		s.Do(context.Background(), "uid-1", hashOf("csr"), func(context.Context) (idempotency.Entry, error) {
			close(started)
			<-release
			panic("hsm exploded")
		})
	}()
	<-started
	waiter := make(chan error, 1)
	go func() {
		_, _, err := s.Do(context.Background(), "uid-1", hashOf("csr"), func(context.Context) (idempotency.Entry, error) {
			return idempotency.Entry{}, nil
		})
		waiter <- err
	}()
	time.Sleep(10 * time.Millisecond)
	close(release)
	select {
	case err := <-waiter:
		if err == nil {
			t.Error("waiter got no error after the leader panicked")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter hangs after the leader panicked")
	}
}

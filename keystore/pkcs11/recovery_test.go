//go:build cgo

package pkcs11_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cryptoki "github.com/miekg/pkcs11"

	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/pkcs11"
)

// TestSessionsClosedFromOutside: while 16 goroutines sign, every session of the token is
// closed from outside, several times (which also logs the user out and, in SoftHSM,
// invalidates the key's handle). Each time, the fault is seen to strike: the key's pooled
// sessions are open and logged in before C_CloseAllSessions and all closed after it, and the
// token is logged out. Each time the key recovers by itself: signatures verify again within
// seconds, on sessions it opened and logged in again. Every signature returned verifies; every
// error wraps keyerr.ErrUnavailable (most calls succeed after the internal retry); afterwards
// the key signs again without being re-opened.
//
// The sessions are closed between two calls of each goroutine, not during one: SoftHSM's
// C_CloseAllSessions frees the session objects that a concurrent C_SignInit or C_Sign of
// another thread is using (SessionManager::closeAllSessions deletes them while C_Sign holds a
// bare pointer), which crashes the process whatever the caller does.
func TestSessionsClosedFromOutside(t *testing.T) {
	tok := softhsmtest.New(t)
	_, uri := generate(t, tok, "ca", keyerr.P256)
	key := open(t, uri, pkcs11.Options{})
	ctx, slot := tok.Outside(t)

	var ok, unavailable atomic.Int64
	var between sync.RWMutex // held by each Sign (read) and by C_CloseAllSessions (write)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				between.RLock()
				err := signs(key)
				between.RUnlock()
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, keyerr.ErrUnavailable):
					unavailable.Add(1)
				default:
					t.Errorf("Sign: %v (neither a verified signature nor keyerr.ErrUnavailable)", err)
					return
				}
			}
		})
	}
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop); wg.Wait() }) }
	defer halt() // before a t.Fatalf's cleanups close the key
	// strike closes every session of the token from outside while no Sign runs, checks that
	// the fault struck the key, and returns the number of signatures made until then.
	strike := func(round int) int64 {
		between.Lock()
		defer between.Unlock() // also when a t.Fatalf ends the test here, so that halt can stop the signers
		open := loggedInSessions(t, ctx, key, fmt.Sprintf("round %d, before C_CloseAllSessions", round))
		if err := ctx.CloseAllSessions(slot); err != nil {
			t.Fatalf("round %d: C_CloseAllSessions: %v", round, err)
		}
		if still := openSessions(ctx, key); len(still) > 0 {
			t.Fatalf("round %d: %d of the key's %d open sessions are still open after C_CloseAllSessions: the fault did not strike", round, len(still), open)
		}
		if !softhsmtest.LoggedOut(t, ctx, slot) {
			t.Fatalf("round %d: the token is still logged in after C_CloseAllSessions: the fault did not strike", round)
		}
		return ok.Load()
	}
	for round := range 5 {
		time.Sleep(30 * time.Millisecond)
		signed := strike(round)
		for deadline := time.Now().Add(10 * time.Second); ok.Load() < signed+16; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d signatures in the 10 s after the sessions were closed (%d unavailable errors): the key did not recover", round, ok.Load()-signed, unavailable.Load())
			}
		}
	}
	time.Sleep(30 * time.Millisecond)
	halt()
	t.Logf("%d signatures, %d unavailable errors", ok.Load(), unavailable.Load())
	for range 3 {
		if err := signs(key); err != nil {
			t.Errorf("Sign after the sessions were closed: %v", err)
		}
	}
	loggedInSessions(t, ctx, key, "after the rounds")
}

// openSessions returns the states of the key's pooled sessions that are open, by handle, as
// the module tells ctx (another context on it). Call it while no Sign runs.
func openSessions(ctx *cryptoki.Ctx, key *pkcs11.Key) map[cryptoki.SessionHandle]uint {
	idle, _ := pkcs11.PoolSessions(key)
	open := map[cryptoki.SessionHandle]uint{}
	for _, h := range idle {
		if info, err := ctx.GetSessionInfo(h); err == nil {
			open[h] = info.State
		}
	}
	return open
}

// loggedInSessions fails the test unless every pooled session of the key is idle (when, tells
// when) and at least one is open, all those open logged in as the user; it returns how many
// are open.
func loggedInSessions(t *testing.T, ctx *cryptoki.Ctx, key *pkcs11.Key, when string) int {
	t.Helper()
	if _, busy := pkcs11.PoolSessions(key); busy != 0 {
		t.Fatalf("%s: %d of the key's sessions are lent out while no Sign runs", when, busy)
	}
	open := openSessions(ctx, key)
	if len(open) == 0 {
		t.Fatalf("%s: none of the key's pooled sessions is open", when)
	}
	for h, state := range open {
		if state != cryptoki.CKS_RO_USER_FUNCTIONS && state != cryptoki.CKS_RW_USER_FUNCTIONS {
			t.Errorf("%s: the key's session %d is in state %d, not logged in as the user", when, h, state)
		}
	}
	return len(open)
}

// TestModuleFinalizedFromOutside: after the module is finalized from outside, Sign fails with
// errors wrapping keyerr.ErrUnavailable; a fresh Open of the same URI initializes the module
// again and signs, while the old key stays unusable (its handles belong to the ended
// initialization) and can still be closed without harm to the new one.
func TestModuleFinalizedFromOutside(t *testing.T) {
	tok := softhsmtest.New(t)
	_, uri := generate(t, tok, "ca", keyerr.RSA2048)
	old := open(t, uri, pkcs11.Options{})
	if err := signs(old); err != nil {
		t.Fatal(err)
	}
	ctx, _ := tok.Outside(t)
	if err := ctx.Finalize(); err != nil {
		t.Fatalf("C_Finalize: %v", err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := signs(old); !errors.Is(err, keyerr.ErrUnavailable) {
				t.Errorf("Sign after C_Finalize: %v, want keyerr.ErrUnavailable", err)
			}
		})
	}
	wg.Wait()

	fresh := open(t, uri, pkcs11.Options{})
	if err := signs(fresh); err != nil {
		t.Fatalf("Sign with the key opened again: %v", err)
	}
	if err := signs(old); !errors.Is(err, keyerr.ErrUnavailable) {
		t.Errorf("Sign with the old key after the module was initialized again: %v, want keyerr.ErrUnavailable", err)
	}
	if err := old.Close(); err != nil {
		t.Errorf("closing the old key: %v", err)
	}
	for range 3 {
		if err := signs(fresh); err != nil {
			t.Errorf("Sign with the new key after the old one closed: %v", err)
		}
	}
}

// TestTwoKeysOnOneModule: two keys on one token work side by side, and closing one leaves the
// other working (the module stays initialized and the login stays).
func TestTwoKeysOnOneModule(t *testing.T) {
	tok := softhsmtest.New(t)
	genA, uriA := generate(t, tok, "a", keyerr.P256)
	genB, uriB := generate(t, tok, "b", keyerr.RSA2048)
	for _, k := range []*pkcs11.Key{genA, genB} {
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}
	a := open(t, uriA, pkcs11.Options{})
	b := open(t, uriB, pkcs11.Options{})
	var wg sync.WaitGroup
	for _, k := range []*pkcs11.Key{a, b, a, b} {
		wg.Go(func() {
			for range 10 {
				if err := signs(k); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := signs(a); err == nil || errors.Is(err, keyerr.ErrUnavailable) {
		t.Errorf("Sign after Close: %v, want a final error", err)
	}
	for range 5 {
		if err := signs(b); err != nil {
			t.Errorf("Sign with b after a closed: %v", err)
		}
	}
	a2 := open(t, uriA, pkcs11.Options{})
	if err := signs(a2); err != nil {
		t.Errorf("Sign with a opened again: %v", err)
	}
}

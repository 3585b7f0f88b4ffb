//go:build cgo

package pkcs11_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/pkcs11"
)

// TestSessionsClosedFromOutside: while 16 goroutines sign, every session of the token is
// closed from outside, several times (which also logs the user out and, in SoftHSM,
// invalidates the key's handle). Every signature returned verifies; every error wraps
// keyerr.ErrUnavailable (most calls succeed after the internal retry); afterwards the key signs
// again without being re-opened.
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
	for range 5 {
		time.Sleep(30 * time.Millisecond)
		between.Lock()
		err := ctx.CloseAllSessions(slot)
		between.Unlock()
		if err != nil {
			t.Errorf("C_CloseAllSessions: %v", err)
		}
	}
	time.Sleep(30 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d signatures, %d unavailable errors", ok.Load(), unavailable.Load())
	for range 3 {
		if err := signs(key); err != nil {
			t.Errorf("Sign after the sessions were closed: %v", err)
		}
	}
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

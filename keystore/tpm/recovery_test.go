package tpm_test

import (
	"crypto"
	"crypto/ecdsa"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/tpm"
)

// TestRecoveryAfterRestart signs in a loop with a persistent and a blob key while swtpm is
// killed and restarted on the same state: every signature returned verifies, every failure
// wraps keyerr.ErrUnavailable, the open keys sign again once swtpm is back (the blob is
// loaded again), and a fresh Open of each URI signs.
func TestRecoveryAfterRestart(t *testing.T) {
	t.Parallel()
	env := swTPM(t)
	uris := []string{
		env.generate(t, "handle=0x81000500", keyerr.P256),
		env.generate(t, "blob="+blobPath(t), keyerr.P384),
	}
	keys := []*tpm.Key{env.open(t, uris[0]), env.open(t, uris[1])}

	var (
		restarted atomic.Bool
		before    [2]atomic.Int64 // signatures made before the restart, per key
		after     [2]atomic.Int64 // and after it
		failures  atomic.Int64
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for i, k := range keys {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				wasRestarted := restarted.Load()
				sig, err := k.Sign(nil, digest(), crypto.SHA256)
				switch {
				case err != nil && !isUnavailable(err):
					t.Errorf("%s: a failure that does not wrap keyerr.ErrUnavailable: %v", k.URI(), err)
					return
				case err != nil:
					failures.Add(1)
					time.Sleep(5 * time.Millisecond)
				case !ecdsa.VerifyASN1(k.Public().(*ecdsa.PublicKey), digest(), sig):
					t.Errorf("%s: a returned signature does not verify", k.URI())
					return
				case wasRestarted:
					after[i].Add(1)
				default:
					before[i].Add(1)
				}
			}
		})
	}
	waitFor(t, "signatures before the restart", func() bool { return before[0].Load() >= 10 && before[1].Load() >= 10 })
	env.swtpm.Restart(t)
	restarted.Store(true)
	waitFor(t, "signatures after the restart", func() bool { return after[0].Load() >= 10 && after[1].Load() >= 10 })
	close(stop)
	wg.Wait()
	t.Logf("signatures before/after the restart: %d/%d (handle), %d/%d (blob); %d failures while swtpm was down",
		before[0].Load(), after[0].Load(), before[1].Load(), after[1].Load(), failures.Load())

	for _, uri := range uris {
		k := env.open(t, uri)
		sig, err := k.Sign(nil, digest(), crypto.SHA256)
		if err != nil || !ecdsa.VerifyASN1(k.Public().(*ecdsa.PublicKey), digest(), sig) {
			t.Errorf("a fresh Open of %s after the restart does not sign: %v", uri, err)
		}
	}
}

// TestRestartMovesTransientHandles: after a restart, blob keys are loaded again in the order
// they sign, so a key's old transient handle may hold another key. The key notices (the
// signature does not verify), loads itself again and signs; and Close never flushes another
// key's object. (swtpm gives a loaded object the first free slot; the storage root key takes
// one while a blob loads.)
func TestRestartMovesTransientHandles(t *testing.T) {
	t.Parallel()
	env := swTPM(t)
	a := env.open(t, env.generate(t, "blob="+blobPath(t), keyerr.P256)) // slot 1
	b := env.open(t, env.generate(t, "blob="+blobPath(t), keyerr.P256)) // slot 2
	sign := func(k *tpm.Key) {
		t.Helper()
		sig, err := k.Sign(nil, digest(), crypto.SHA256)
		if err != nil {
			t.Fatalf("%s: %v", k.URI(), err)
		}
		if !ecdsa.VerifyASN1(k.Public().(*ecdsa.PublicKey), digest(), sig) {
			t.Fatalf("%s: a returned signature does not verify", k.URI())
		}
	}
	env.swtpm.Restart(t)
	sign(b) // b's slot 2 is empty: b loads again, into slot 1
	sign(a) // a's slot 1 holds b: the signature does not verify; a loads again, into slot 2

	env.swtpm.Restart(t)
	sign(a) // a's slot 2 is empty: a loads again, into slot 1, b's
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := transientCount(t, env.raw); n != 1 {
		t.Errorf("after closing b, %d transient objects are loaded, want a's alone", n)
	}
	sign(a)
}

// waitFor polls cond until it holds, failing the test after 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

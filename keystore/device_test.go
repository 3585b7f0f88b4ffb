package keystore

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeDevice is a device whose failures the test controls: while down, opening fails and
// every signature fails as unavailable; hang makes the next signatures block until released.
type fakeDevice struct {
	key    *ecdsa.PrivateKey
	down   atomic.Bool
	opens  atomic.Int32
	closes atomic.Int32
	hang   chan struct{} // when non-nil, Sign blocks on it
	mu     sync.Mutex
}

type fakeKey struct {
	d      *fakeDevice
	closed atomic.Bool
}

func (k *fakeKey) Public() crypto.PublicKey { return &k.d.key.PublicKey }

func (k *fakeKey) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	k.d.mu.Lock()
	hang := k.d.hang
	k.d.mu.Unlock()
	if hang != nil {
		<-hang
	}
	if k.closed.Load() {
		return nil, errors.New("signing with a closed handle")
	}
	if k.d.down.Load() {
		return nil, fmt.Errorf("session gone: %w", ErrUnavailable)
	}
	return k.d.key.Sign(r, digest, opts)
}

func (k *fakeKey) Close() error {
	k.closed.Store(true)
	k.d.closes.Add(1)
	return nil
}

func (d *fakeDevice) open(context.Context) (Key, error) {
	d.opens.Add(1)
	if d.down.Load() {
		return nil, fmt.Errorf("no token: %w", ErrUnavailable)
	}
	return &fakeKey{d: d}, nil
}

func newFake(t *testing.T, opts Options) (*fakeDevice, *Device) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDevice{key: key}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	d, err := openDevice(context.Background(), "fake", "fake:object=ca?pin-value=1234", opts, f.open)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return f, d
}

func sign(d *Device) error {
	h := sha256.Sum256([]byte("x"))
	sig, err := d.Sign(rand.Reader, h[:], crypto.SHA256)
	if err == nil && !ecdsa.VerifyASN1(d.Public().(*ecdsa.PublicKey), h[:], sig) {
		return errors.New("a signature does not verify")
	}
	return err
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeviceRecovers: when the device goes away, signatures fail as unavailable (at once,
// without touching the device again), the key reports unavailable with the reason, and once
// the device is back the key is re-opened by itself and signs again.
func TestDeviceRecovers(t *testing.T) {
	var ops sync.Map
	f, d := newFake(t, Options{Observe: func(op Operation) {
		n, _ := ops.LoadOrStore(op.Outcome, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
	}})
	if err := sign(d); err != nil {
		t.Fatal(err)
	}
	f.down.Store(true)
	err := sign(d)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Sign on a lost device = %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "1234") {
		t.Errorf("error %q shows the PIN", err)
	}
	waitFor(t, "the key reports unavailable", func() bool { return !d.Available() && d.Err() != nil })
	if err := sign(d); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Sign while re-opening = %v, want ErrUnavailable", err)
	}
	waitFor(t, "the broken handle is closed", func() bool { return f.closes.Load() == 1 })
	waitFor(t, "re-opening is attempted", func() bool { return f.opens.Load() >= 3 })
	f.down.Store(false)
	waitFor(t, "the key is available again", d.Available)
	if err := sign(d); err != nil {
		t.Fatalf("Sign after recovery: %v", err)
	}
	for outcome, want := range map[string]int32{OutcomeOK: 2, OutcomeUnavailable: 2} {
		n, _ := ops.Load(outcome)
		if n == nil || n.(*atomic.Int32).Load() != want {
			t.Errorf("observed %v %q operations, want %d", n, outcome, want)
		}
	}
}

// TestDeviceTimeout: a signature the device does not answer in time fails as unavailable and
// the key is re-opened; the hung call's handle is closed only after it returns.
func TestDeviceTimeout(t *testing.T) {
	f, d := newFake(t, Options{Timeout: 200 * time.Millisecond})
	release := make(chan struct{})
	f.mu.Lock()
	f.hang = release
	f.mu.Unlock()
	start := time.Now()
	err := sign(d)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "did not answer within 200ms") {
		t.Fatalf("Sign on a hung device = %v, want ErrUnavailable naming the timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Sign returned after %s", took)
	}
	f.mu.Lock()
	f.hang = nil
	f.mu.Unlock()
	waitFor(t, "the key is re-opened", d.Available)
	if f.closes.Load() != 0 {
		t.Error("the hung handle was closed under the running call")
	}
	close(release)
	if err := sign(d); err != nil {
		t.Fatalf("Sign after recovery: %v", err)
	}
}

// TestDeviceRefusesADifferentKey: a URI that, after the device came back, finds another key
// is not taken for the CA key: the key stays unavailable and says why.
func TestDeviceRefusesADifferentKey(t *testing.T) {
	f, d := newFake(t, Options{})
	f.down.Store(true)
	if err := sign(d); !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.key = other
	f.down.Store(false)
	waitFor(t, "the different key is refused", func() bool {
		err := d.Err()
		return err != nil && strings.Contains(err.Error(), "different key")
	})
	if d.Available() {
		t.Fatal("a different key was taken as the CA key")
	}
}

// TestDeviceConcurrentFailure: many callers failing at once close the broken handle once and
// re-open once; Close during recovery returns.
func TestDeviceConcurrentFailure(t *testing.T) {
	f, d := newFake(t, Options{})
	f.down.Store(true)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if err := sign(d); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Sign = %v, want ErrUnavailable", err)
			}
		})
	}
	wg.Wait()
	waitFor(t, "the broken handle is closed", func() bool { return f.closes.Load() == 1 })
	time.Sleep(50 * time.Millisecond)
	if n := f.closes.Load(); n != 1 {
		t.Errorf("the broken handle was closed %d times", n)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

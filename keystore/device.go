package keystore

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// ErrUnavailable is keyerr.ErrUnavailable: the device holding a key cannot be reached now.
// A call that fails with it may succeed later, once the key is re-opened.
var ErrUnavailable = keyerr.ErrUnavailable

// Operation is one signature, as Options.Observe is told of it.
type Operation struct {
	Backend  string
	Outcome  string // OutcomeOK, OutcomeError or OutcomeUnavailable
	Duration time.Duration
}

// Outcomes of an Operation.
const (
	OutcomeOK          = "ok"
	OutcomeError       = "error"
	OutcomeUnavailable = "unavailable"
)

// Device is an HSM or TPM key as Open returns it. Every signature is bounded by the
// configured timeout. A call that fails because the device went away (keyerr.ErrUnavailable,
// or the timeout) marks the key unavailable; a background loop then closes the broken handle
// and opens the key again by its URI, with back-off, until it is found again with the same
// public key. Meanwhile Sign fails at once with ErrUnavailable, so callers retry instead of
// queueing behind a dead device. Device is safe for concurrent use.
type Device struct {
	backend string
	uri     string // redacted: safe for errors
	open    func(context.Context) (Key, error)
	pub     crypto.PublicKey
	timeout time.Duration
	observe func(Operation)

	mu      sync.Mutex
	cur     *generation // nil while unavailable
	lastErr error       // why the key is unavailable
	broken  chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

// generation is one opening of the key, with the calls still running on it, so that a broken
// handle is closed only once they have returned (or given up on).
type generation struct {
	key      Key
	inflight sync.WaitGroup
}

// backoff bounds the wait between two attempts to re-open a key.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

func openDevice(ctx context.Context, backend, uri string, opts Options, open func(context.Context) (Key, error)) (*Device, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	key, err := open(ctx)
	if err != nil {
		return nil, err
	}
	return newDevice(backend, uri, opts, key, open), nil
}

// newDevice wraps key, opened already, whose URI open opens again after a failure.
func newDevice(backend, uri string, opts Options, key Key, open func(context.Context) (Key, error)) *Device {
	loopCtx, stop := context.WithCancel(context.Background())
	d := &Device{
		backend: backend, uri: redact(uri), open: open, pub: key.Public(), timeout: opts.Timeout,
		observe: opts.Observe, cur: &generation{key: key},
		broken: make(chan struct{}, 1), stop: stop, done: make(chan struct{}),
	}
	go d.recover(loopCtx)
	return d
}

// Public returns the key's public key, as found when it was first opened.
func (d *Device) Public() crypto.PublicKey { return d.pub }

// Backend names the backend holding the key (BackendPKCS11, BackendTPM).
func (d *Device) Backend() string { return d.backend }

// Available reports whether the key can sign now; when it cannot, Err says why.
func (d *Device) Available() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur != nil
}

// Err is why the key is unavailable, or nil.
func (d *Device) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil {
		return nil
	}
	return d.lastErr
}

// Sign signs digest with the key, within the timeout.
func (d *Device) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	start := time.Now()
	sig, err := d.sign(rand, digest, opts)
	if d.observe != nil {
		outcome := OutcomeOK
		switch {
		case errors.Is(err, ErrUnavailable):
			outcome = OutcomeUnavailable
		case err != nil:
			outcome = OutcomeError
		}
		d.observe(Operation{Backend: d.backend, Outcome: outcome, Duration: time.Since(start)})
	}
	return sig, err
}

func (d *Device) sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	d.mu.Lock()
	g, why := d.cur, d.lastErr
	if g != nil {
		g.inflight.Add(1)
	}
	d.mu.Unlock()
	if g == nil {
		return nil, fmt.Errorf("signing with %s: %w: being re-opened after: %v", d.uri, ErrUnavailable, why)
	}
	type result struct {
		sig []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer g.inflight.Done()
		sig, err := g.key.Sign(rand, digest, opts)
		done <- result{sig, err}
	}()
	timer := time.NewTimer(d.timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		if errors.Is(r.err, ErrUnavailable) {
			d.fail(g, r.err)
		}
		if r.err != nil {
			return nil, fmt.Errorf("signing with %s: %w", d.uri, r.err)
		}
		return r.sig, nil
	case <-timer.C:
		err := fmt.Errorf("%w: the device did not answer within %s", ErrUnavailable, d.timeout)
		d.fail(g, err)
		return nil, fmt.Errorf("signing with %s: %w", d.uri, err)
	}
}

// fail marks generation g broken (once) and wakes the recovery loop.
func (d *Device) fail(g *generation, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != g {
		return // already replaced or already marked
	}
	d.cur, d.lastErr = nil, err
	go func() {
		closeWhenIdle(g, d.timeout)
	}()
	select {
	case d.broken <- struct{}{}:
	default:
	}
}

// closeWhenIdle closes a broken generation's key once the calls still running on it have
// returned; a call hung inside the device for longer than wait is abandoned with its handle.
func closeWhenIdle(g *generation, wait time.Duration) {
	idle := make(chan struct{})
	go func() { g.inflight.Wait(); close(idle) }()
	select {
	case <-idle:
		_ = g.key.Close()
	case <-time.After(wait):
	}
}

// recover re-opens the key each time it is marked broken, until Close.
func (d *Device) recover(ctx context.Context) {
	defer close(d.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.broken:
		}
		for wait := minBackoff; ; wait = min(2*wait, maxBackoff) {
			if d.reopen(ctx) {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// reopen opens the key again by its URI; it reports whether the key is available again.
func (d *Device) reopen(ctx context.Context) bool {
	octx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	key, err := d.open(octx)
	if err == nil && !samePublic(key.Public(), d.pub) {
		_ = key.Close()
		err = fmt.Errorf("%s now names a different key than the one opened at start", d.uri)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.lastErr = err
		return false
	}
	if ctx.Err() != nil { // closed meanwhile
		_ = key.Close()
		return true
	}
	d.cur, d.lastErr = &generation{key: key}, nil
	return true
}

// Close stops the recovery loop and closes the key.
func (d *Device) Close() error {
	d.stop()
	<-d.done
	d.mu.Lock()
	g := d.cur
	d.cur, d.lastErr = nil, errors.New("key closed")
	d.mu.Unlock()
	if g == nil {
		return nil
	}
	idle := make(chan struct{})
	go func() { g.inflight.Wait(); close(idle) }()
	select {
	case <-idle:
		return g.key.Close()
	case <-time.After(d.timeout):
		return fmt.Errorf("closing %s: a call is still running in the device after %s; its handle is left open", d.uri, d.timeout)
	}
}

// samePublic reports whether two public keys are equal.
func samePublic(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// observedFile is a file key whose signatures are reported to Options.Observe. It stays a
// SoftwareKey: certsign still knows it signs with Go's own implementation.
type observedFile struct {
	SoftwareKey
	observe func(Operation)
}

func (k observedFile) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	start := time.Now()
	sig, err := k.SoftwareKey.Sign(rand, digest, opts)
	outcome := OutcomeOK
	if err != nil {
		outcome = OutcomeError
	}
	k.observe(Operation{Backend: BackendFile, Outcome: outcome, Duration: time.Since(start)})
	return sig, err
}

// observed wraps a file key so that its signatures are observed, when observe is set.
func observed(key SoftwareKey, observe func(Operation)) Key {
	if observe == nil {
		return key
	}
	return observedFile{SoftwareKey: key, observe: observe}
}

package witness_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/watcher/internal/looptest"
	"github.com/signet-pki/signet/watcher/witness"
)

const (
	ns     = "signet-system"
	cmName = "signet-ledger-witness"
	origin = "signet-ledger/test"
)

// log is a signing server's ledger as the witness sees it: a tree, a key, and what it answers.
type log struct {
	mu     sync.Mutex
	tree   *ledgerproof.Tree
	signer note.Signer
	down   error // answer every call with this error
}

func newLog(t *testing.T, key crypto.Signer, n int) *log {
	t.Helper()
	s, err := ledgerproof.NewNoteSigner(origin, key)
	if err != nil {
		t.Fatal(err)
	}
	l := &log{tree: &ledgerproof.Tree{}, signer: s}
	l.grow(t, n)
	return l
}

func (l *log) grow(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		if _, err := l.tree.Append(fmt.Appendf(nil, `{"seq":%d,"decision":"issued"}`, l.tree.Size()+1)); err != nil {
			t.Fatal(err)
		}
	}
}

// replace makes the log another tree: the first n leaves of different records.
func (l *log) replace(t *testing.T, n int, tag string) {
	t.Helper()
	l.mu.Lock()
	l.tree = &ledgerproof.Tree{}
	for i := range n {
		if _, err := l.tree.Append(fmt.Appendf(nil, `{"seq":%d,"tag":%q}`, i+1, tag)); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Unlock()
}

func (l *log) signed() ([]byte, error) {
	cp, err := l.tree.Checkpoint(origin)
	if err != nil {
		return nil, err
	}
	return ledgerproof.SignCheckpoint(cp, l.signer)
}

func (l *log) LedgerCheckpoint(context.Context) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down != nil {
		return nil, l.down
	}
	return l.signed()
}

func (l *log) LedgerConsistency(_ context.Context, oldSize int64) ([]byte, [][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down != nil {
		return nil, nil, l.down
	}
	if oldSize > l.tree.Size() {
		return nil, nil, errors.New("FailedPrecondition: old_size beyond the ledger")
	}
	proof, err := l.tree.ProveConsistency(oldSize, l.tree.Size())
	if err != nil {
		return nil, nil, err
	}
	signed, err := l.signed()
	var out [][]byte
	for _, h := range proof {
		out = append(out, append([]byte(nil), h[:]...))
	}
	return signed, out, err
}

type metrics struct {
	mu         sync.Mutex
	results    []string
	size       int64
	consistent bool
}

func (m *metrics) ObserveCheck(r string) {
	m.mu.Lock()
	m.results = append(m.results, r)
	m.mu.Unlock()
}
func (m *metrics) SetWitnessed(_ string, size int64) {
	m.mu.Lock()
	m.size = size
	m.mu.Unlock()
}
func (m *metrics) SetConsistent(ok bool) { m.mu.Lock(); m.consistent = ok; m.mu.Unlock() }

func (m *metrics) last() (string, int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.results) == 0 {
		return "", m.size, m.consistent
	}
	return m.results[len(m.results)-1], m.size, m.consistent
}

type fixture struct {
	kube *fake.Clientset
	rec  *record.FakeRecorder
	m    *metrics
	w    *witness.Witness
	ctx  context.Context
}

func newFixture(t *testing.T, src witness.Source, keys []crypto.PublicKey, signOnAlarm bool) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := &fixture{kube: fake.NewClientset(), rec: record.NewFakeRecorder(20), m: &metrics{}, ctx: ctx}
	w, err := witness.New(f.kube.CoreV1(), src, witness.Options{Namespace: ns, Name: cmName, Keys: keys,
		Period: time.Hour, SignOnAlarm: signOnAlarm, Recorder: f.rec, Metrics: f.m})
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	return f
}

// check runs one check (Run's first, then cancelled).
func (f *fixture) check(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	if err := f.w.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) stored(t *testing.T) ledgerproof.Checkpoint {
	t.Helper()
	cm, err := f.kube.CoreV1().ConfigMaps(ns).Get(f.ctx, cmName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := ledgerproof.ParseCheckpoint([]byte(strings.SplitN(cm.Data[witness.DataKey(origin)], "\n\n", 2)[0] + "\n"))
	if err != nil {
		t.Fatalf("stored checkpoint: %v", err)
	}
	return cp
}

func TestWitness(t *testing.T) {
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, key := range map[string]crypto.Signer{"ed25519": edKey, "ecdsa": ecKey} {
		t.Run(name, func(t *testing.T) {
			l := newLog(t, key, 5)
			f := newFixture(t, l, []crypto.PublicKey{key.Public()}, false)

			f.check(t) // first sight: accepted as the start
			if cp := f.stored(t); cp.Size != 5 || f.w.Alarm() != nil || !f.w.HasSynced() {
				t.Fatalf("first check: stored size %d, alarm %v", cp.Size, f.w.Alarm())
			}
			l.grow(t, 7)
			f.check(t) // grew consistently: the newer one is stored
			if cp := f.stored(t); cp.Size != 12 || f.w.Alarm() != nil {
				t.Fatalf("after growth: stored size %d, alarm %v", cp.Size, f.w.Alarm())
			}
			if r, size, ok := f.m.last(); r != witness.ResultOK || size != 12 || !ok {
				t.Errorf("metrics = %s, %d, %v", r, size, ok)
			}

			l.down = errors.New("connection refused")
			f.check(t) // unreachable: no alarm
			if r, _, _ := f.m.last(); r != witness.ResultError || f.w.Alarm() != nil {
				t.Errorf("unreachable server: result %s, alarm %v", r, f.w.Alarm())
			}
			l.down = nil

			l.replace(t, 9, "older copy")
			f.check(t) // shrank: alarm, signing paused, evidence kept
			if err := f.w.Blocked(); err == nil || !strings.Contains(err.Error(), "shrank") {
				t.Fatalf("shrunk log: Blocked() = %v", err)
			}
			if f.stored(t).Size != 12 {
				t.Error("the witnessed checkpoint was overwritten by the shrunk one")
			}
			if ev := looptest.Events(f.rec); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+witness.ReasonLedgerShrunk) {
				t.Errorf("events = %q, want one Warning %s", ev, witness.ReasonLedgerShrunk)
			}
			if r, _, ok := f.m.last(); r != witness.ResultAlarm || ok {
				t.Errorf("metrics = %s consistent=%v, want alarm", r, ok)
			}
			f.check(t) // the same alarm again: no second Event
			if ev := looptest.Events(f.rec); len(ev) != 0 {
				t.Errorf("repeated alarm recorded Events again: %q", ev)
			}

			l.replace(t, 14, "another history")
			f.check(t) // longer, but not an extension
			if err := f.w.Alarm(); err == nil || !strings.Contains(err.Error(), "not an extension") {
				t.Fatalf("forked log: alarm %v", err)
			}

			l.replace(t, 0, "")
			l.grow(t, 12) // the server's ledger restored whole
			l.grow(t, 1)
			f.check(t)
			if f.w.Alarm() != nil || f.stored(t).Size != 13 {
				t.Fatalf("restored log: alarm %v, stored %d", f.w.Alarm(), f.stored(t).Size)
			}
			if ev := looptest.Events(f.rec); len(ev) != 2 || !strings.HasPrefix(ev[1], "Normal "+witness.ReasonLedgerConsistent) {
				t.Errorf("events = %q, want the fork's Warning then Normal %s", ev, witness.ReasonLedgerConsistent)
			}
		})
	}
}

// TestWitnessSameSizeFork: a log of the witnessed size with another root is an alarm.
func TestWitnessSameSizeFork(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	l := newLog(t, key, 6)
	f := newFixture(t, l, []crypto.PublicKey{key.Public()}, false)
	f.check(t)
	l.replace(t, 6, "same size")
	f.check(t)
	if err := f.w.Alarm(); err == nil || !strings.Contains(err.Error(), "another history") {
		t.Fatalf("alarm = %v", err)
	}
}

// TestWitnessUntrustedKey: a checkpoint no configured key signed is an alarm; with
// SignOnAlarm, signing goes on while it is raised.
func TestWitnessUntrustedKey(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	l := newLog(t, other, 3)
	f := newFixture(t, l, []crypto.PublicKey{key.Public()}, true)
	f.check(t)
	if err := f.w.Alarm(); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("alarm = %v", err)
	}
	if err := f.w.Blocked(); err != nil {
		t.Errorf("SignOnAlarm: Blocked() = %v, want nil", err)
	}
	if ev := looptest.Events(f.rec); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+witness.ReasonLedgerUntrusted) {
		t.Errorf("events = %q", ev)
	}
}

// TestWitnessBlockedUntilChecked: signing waits for the first check of a term (the ConfigMap
// may hold an earlier term's alarm), and for one attempt only: a server that cannot be reached
// does not keep it waiting.
func TestWitnessBlockedUntilChecked(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	l := newLog(t, key, 4)
	f := newFixture(t, l, []crypto.PublicKey{key.Public()}, false)
	if err := f.w.Blocked(); !errors.Is(err, witness.ErrNotChecked) {
		t.Fatalf("before the first check: Blocked() = %v, want ErrNotChecked", err)
	}
	if f.w.Alarm() != nil {
		t.Errorf("before the first check: Alarm() = %v, want nil", f.w.Alarm())
	}
	waited := make(chan struct{})
	go func() { f.w.Wait(t.Context()); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned before the first check")
	case <-time.After(20 * time.Millisecond):
	}
	f.check(t)
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after the first check")
	}
	if err := f.w.Blocked(); err != nil {
		t.Fatalf("after a successful check: Blocked() = %v", err)
	}

	down := newFixture(t, l, []crypto.PublicKey{key.Public()}, false)
	l.down = errors.New("connection refused")
	down.check(t)
	if err := down.w.Blocked(); err != nil {
		t.Errorf("after a failed check: Blocked() = %v, want nil", err)
	}

	signing := newFixture(t, l, []crypto.PublicKey{key.Public()}, true)
	if err := signing.w.Blocked(); err != nil {
		t.Errorf("SignOnAlarm before the first check: Blocked() = %v, want nil", err)
	}
}

// TestWitnessAlarmEventOnce: an alarm raised again with the same reason records no second
// Event, though its message (the sizes) changed; one of another reason does.
func TestWitnessAlarmEventOnce(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	l := newLog(t, key, 8)
	f := newFixture(t, l, []crypto.PublicKey{key.Public()}, false)
	f.check(t)
	l.replace(t, 5, "older copy")
	f.check(t)
	first := f.w.Alarm()
	l.replace(t, 6, "older copy")
	f.check(t)
	second := f.w.Alarm()
	if first == nil || second == nil || first.Error() == second.Error() {
		t.Fatalf("alarms = %v, then %v; want two shrunk alarms with different sizes", first, second)
	}
	if !strings.Contains(second.Error(), "has 6 records") {
		t.Errorf("alarm = %v, want the latest sizes", second)
	}
	if ev := looptest.Events(f.rec); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+witness.ReasonLedgerShrunk) {
		t.Errorf("events = %q, want one Warning %s", ev, witness.ReasonLedgerShrunk)
	}
	if r, _, ok := f.m.last(); r != witness.ResultAlarm || ok {
		t.Errorf("metrics = %s consistent=%v, want alarm", r, ok)
	}

	l.replace(t, 8, "same size")
	f.check(t) // another reason: a new Event
	if ev := looptest.Events(f.rec); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+witness.ReasonLedgerInconsistent) {
		t.Errorf("events = %q, want one Warning %s", ev, witness.ReasonLedgerInconsistent)
	}
}

// TestWitnessPause: Blocked returns the error Options.Pause built, once for each alarm (and
// once for the pending first check), not once a call.
func TestWitnessPause(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	l := newLog(t, key, 8)
	var built []error
	w, err := witness.New(fake.NewClientset().CoreV1(), l, witness.Options{Namespace: ns, Name: cmName,
		Keys: []crypto.PublicKey{key.Public()}, Period: time.Hour,
		Pause: func(cause error) error {
			built = append(built, cause)
			return fmt.Errorf("paused: %w", cause)
		}})
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	check := func() {
		t.Helper()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := w.Run(cctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := w.Blocked(); !errors.Is(err, witness.ErrNotChecked) || !strings.HasPrefix(err.Error(), "paused: ") {
			t.Fatalf("before the first check: Blocked() = %v", err)
		}
	}
	check()
	l.replace(t, 5, "older copy")
	check()
	first := w.Blocked()
	for range 3 {
		if err := w.Blocked(); err != first || !strings.Contains(err.Error(), "paused: ") || !strings.Contains(err.Error(), "shrank") {
			t.Fatalf("alarm: Blocked() = %v, want the same paused error %v", err, first)
		}
	}
	if len(built) != 2 || !errors.Is(built[0], witness.ErrNotChecked) || built[1] != w.Alarm() {
		t.Errorf("Pause built %q, want once for the pending check and once for the alarm", built)
	}
}

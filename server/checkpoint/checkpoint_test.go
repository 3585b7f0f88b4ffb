package checkpoint_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/checkpoint"
)

const origin = "signet.example/ledger"

// algs are the checkpoint key types the server accepts.
var algs = []string{"Ed25519", "ECDSA P-256"}

// record returns a ledger-like line (without its newline) of seq; history tells two ledgers
// apart.
func record(history string, seq int64) []byte {
	return fmt.Appendf(nil, `{"seq":%d,"decision":"issued","signer":"example.com/%s","serial":"%x"}`, seq, history, seq*7919)
}

// grow appends n records of history to tree.
func grow(t testing.TB, tree *ledgerproof.Tree, history string, n int64) {
	t.Helper()
	for range n {
		if _, err := tree.Append(record(history, tree.Size()+1)); err != nil {
			t.Fatal(err)
		}
	}
}

// newTree returns a tree of n records of history.
func newTree(t testing.TB, history string, n int64) *ledgerproof.Tree {
	t.Helper()
	tree := &ledgerproof.Tree{}
	grow(t, tree, history, n)
	return tree
}

// key is a checkpoint key's signer and verifier under one name.
type key struct {
	pub      crypto.PublicKey
	signer   note.Signer
	verifier note.Verifier
}

// newKey generates a key of alg and names it name.
func newKey(t testing.TB, alg, name string) key {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch alg {
	case "Ed25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case "ECDSA P-256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		t.Fatalf("unknown algorithm %q", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := ledgerproof.NewNoteSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ledgerproof.NewNoteVerifier(name, priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return key{pub: priv.Public(), signer: s, verifier: v}
}

// observer records Options.Observe's calls.
type observer struct {
	mu    sync.Mutex
	calls []observation
}

type observation struct {
	size int64
	lag  time.Duration
}

func (o *observer) observe(size int64, lag time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, observation{size, lag})
}

func (o *observer) get() []observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observation(nil), o.calls...)
}

// testWriter sends the Checkpointer's log to the test's.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// options returns Options for k writing to a new directory, logging to t and observing into o.
func options(t testing.TB, k key, o *observer, interval time.Duration, clk clock.Clock) checkpoint.Options {
	return checkpoint.Options{
		Origin: origin, Signer: k.signer, Dir: t.TempDir(),
		Interval: interval, Observe: o.observe, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
}

// start runs c until the returned function is called (or the test ends); the function
// returns once Run has returned.
func start(t testing.TB, c *checkpoint.Checkpointer) (stop func()) {
	t.Helper()
	stopCh, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		c.Run(stopCh)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(stopCh)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after stop was closed")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond for up to 10 seconds, then fails the test naming what it waited for.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// open verifies signed with k and returns its checkpoint, failing the test if it does not
// verify.
func open(t testing.TB, signed []byte, k key) ledgerproof.Checkpoint {
	t.Helper()
	cp, err := ledgerproof.OpenCheckpoint(signed, origin, k.verifier)
	if err != nil {
		t.Fatalf("OpenCheckpoint: %v\n%s", err, signed)
	}
	return cp
}

// wantCovers checks that signed is k's checkpoint of tree's first size records.
func wantCovers(t testing.TB, signed []byte, k key, tree *ledgerproof.Tree, size int64) {
	t.Helper()
	cp := open(t, signed, k)
	root, err := tree.RootAt(size)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Origin != origin || cp.Size != size || cp.Hash != root {
		t.Fatalf("checkpoint %q %d %v, want %q %d %v", cp.Origin, cp.Size, cp.Hash, origin, size, root)
	}
}

// fileSize returns the size of the checkpoint in dir's file, -1 if it does not verify.
func fileSize(dir string, k key) int64 {
	signed, err := os.ReadFile(filepath.Join(dir, checkpoint.FileName))
	if err != nil {
		return -1
	}
	cp, err := ledgerproof.OpenCheckpoint(signed, origin, k.verifier)
	if err != nil {
		return -1
	}
	return cp.Size
}

func latestSize(c *checkpoint.Checkpointer) int64 {
	_, size := c.Latest()
	return size
}

// TestNewSignsTheTree: New signs the checkpoint of the tree as it is, with either key type,
// keeps it and writes it to the checkpoint file.
func TestNewSignsTheTree(t *testing.T) {
	for _, alg := range algs {
		for _, n := range []int64{0, 1, 5, 17} {
			t.Run(fmt.Sprintf("%s/%d records", alg, n), func(t *testing.T) {
				k := newKey(t, alg, origin)
				tree := newTree(t, "a", n)
				var o observer
				opts := options(t, k, &o, 0, nil)
				c, err := checkpoint.New(tree, opts)
				if err != nil {
					t.Fatal(err)
				}
				signed, size := c.Latest()
				if size != n {
					t.Fatalf("Latest size = %d, want %d", size, n)
				}
				cp := open(t, signed, k)
				root, err := tree.Root()
				if err != nil {
					t.Fatal(err)
				}
				if cp.Size != n || cp.Hash != root || cp.Origin != origin {
					t.Errorf("checkpoint %q %d %v, want %q %d %v (tree.Root)", cp.Origin, cp.Size, cp.Hash, origin, n, root)
				}
				if at, ok := c.At(n); !ok || !bytes.Equal(at, signed) {
					t.Errorf("At(%d) = %q, %v; want the latest checkpoint", n, at, ok)
				}
				file, err := os.ReadFile(filepath.Join(opts.Dir, checkpoint.FileName))
				if err != nil || !bytes.Equal(file, signed) {
					t.Errorf("checkpoint file = %q, %v; want the latest checkpoint %q", file, err, signed)
				}
				if alg == "Ed25519" {
					// x/mod's own verifier, from the vkey operators publish, accepts it too.
					vkey, err := note.NewEd25519VerifierKey(origin, k.pub.(ed25519.PublicKey))
					if err != nil {
						t.Fatal(err)
					}
					v, err := note.NewVerifier(vkey)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := note.Open(signed, note.VerifierList(v)); err != nil {
						t.Errorf("note.Open with vkey %s: %v", vkey, err)
					}
				}
			})
		}
	}
}

// TestNewRefusesIncompleteOptions: New needs an origin, a signer and a directory
// it can write the checkpoint file in.
func TestNewRefusesIncompleteOptions(t *testing.T) {
	k := newKey(t, "Ed25519", origin)
	tree := newTree(t, "a", 3)
	tests := []struct {
		name   string
		change func(*checkpoint.Options)
	}{
		{"no origin", func(o *checkpoint.Options) { o.Origin = "" }},
		{"no signer", func(o *checkpoint.Options) { o.Signer = nil }},
		{"no such directory", func(o *checkpoint.Options) { o.Dir = filepath.Join(o.Dir, "missing") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := options(t, k, &observer{}, 0, nil)
			tt.change(&opts)
			if c, err := checkpoint.New(tree, opts); err == nil {
				t.Fatalf("New = %v, nil; want an error", c)
			}
		})
	}
}

// TestAppendedSignsNewCheckpoint: records appended and announced with Appended are soon
// covered by a new checkpoint, kept (Latest, At), written to the file and observed.
func TestAppendedSignsNewCheckpoint(t *testing.T) {
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) {
			k := newKey(t, alg, origin)
			tree := newTree(t, "a", 4)
			var o observer
			opts := options(t, k, &o, 10*time.Millisecond, nil)
			c, err := checkpoint.New(tree, opts)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := c.Latest()
			start(t, c)

			grow(t, tree, "a", 3)
			c.Appended()
			eventually(t, "a checkpoint of 7 records", func() bool { return latestSize(c) == 7 })
			signed, _ := c.Latest()
			wantCovers(t, signed, k, tree, 7)
			if at, ok := c.At(7); !ok || !bytes.Equal(at, signed) {
				t.Errorf("At(7) = %q, %v; want the latest checkpoint", at, ok)
			}
			if at, ok := c.At(4); !ok || !bytes.Equal(at, first) {
				t.Errorf("At(4) = %q, %v; want New's checkpoint", at, ok)
			}
			eventually(t, "the checkpoint file to cover 7 records", func() bool { return fileSize(opts.Dir, k) == 7 })
			eventually(t, "Observe(7, …)", func() bool { obs := o.get(); return len(obs) > 0 && obs[len(obs)-1].size == 7 })
			for _, ob := range o.get() {
				if ob.lag < 0 || ob.size <= 4 || ob.size > 7 {
					t.Errorf("Observe(%d, %v): want a size in 5..7 and a lag ≥ 0", ob.size, ob.lag)
				}
			}
		})
	}
}

// TestConcurrentAppends runs Run against an appender, as the ledger's writer does, and checks
// every checkpoint kept against the final tree.
func TestConcurrentAppends(t *testing.T) {
	k := newKey(t, "ECDSA P-256", origin)
	tree := newTree(t, "a", 1)
	var o observer
	c, err := checkpoint.New(tree, options(t, k, &o, time.Millisecond, nil))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	for range 300 {
		grow(t, tree, "a", 1)
		c.Appended()
	}
	stop()
	if got := latestSize(c); got != 301 {
		t.Fatalf("after stop, Latest size = %d, want 301", got)
	}
	obs := o.get()
	for i, ob := range obs {
		if ob.lag < 0 || (i > 0 && ob.size <= obs[i-1].size) {
			t.Errorf("Observe call %d: (%d, %v) after %v: want increasing sizes and lags ≥ 0", i, ob.size, ob.lag, obs[max(i-1, 0)])
		}
		if signed, ok := c.At(ob.size); ok {
			wantCovers(t, signed, k, tree, ob.size)
		}
	}
}

// TestIntervalLimitsCheckpoints: Appended calls that come faster than Interval are signed as
// a few checkpoints, not one per call: two checkpoints are at least Interval apart.
func TestIntervalLimitsCheckpoints(t *testing.T) {
	const interval = 200 * time.Millisecond
	k := newKey(t, "Ed25519", origin)
	tree := newTree(t, "a", 2)
	var o observer
	c, err := checkpoint.New(tree, options(t, k, &o, interval, nil))
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	began := time.Now()
	for range 20 {
		grow(t, tree, "a", 1)
		c.Appended()
		time.Sleep(10 * time.Millisecond)
	}
	eventually(t, "a checkpoint of 22 records", func() bool { return latestSize(c) == 22 })
	signed, _ := c.Latest()
	wantCovers(t, signed, k, tree, 22)
	// However slow the machine, checkpoints at least interval apart number at most this.
	most := int(time.Since(began)/interval) + 1
	if obs := o.get(); len(obs) == 0 || len(obs) > most {
		t.Errorf("20 Appended calls 10ms apart gave %d checkpoints %v, want 1 to %d", len(obs), obs, most)
	}
}

// TestIntervalOnClock: after a checkpoint, the next one waits for Interval to pass on the
// clock, and then covers every record appended meanwhile; its lag is the time its oldest
// record waited.
func TestIntervalOnClock(t *testing.T) {
	const interval = time.Minute
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	k := newKey(t, "Ed25519", origin)
	tree := newTree(t, "a", 3)
	var o observer
	opts := options(t, k, &o, interval, clk)
	c, err := checkpoint.New(tree, opts)
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)

	grow(t, tree, "a", 1)
	c.Appended()
	eventually(t, "the first checkpoint, signed at once", func() bool { return latestSize(c) == 4 })
	eventually(t, "Observe(4, 0)", func() bool { return len(o.get()) == 1 })
	if ob := o.get()[0]; ob != (observation{4, 0}) {
		t.Errorf("Observe(%d, %v), want (4, 0)", ob.size, ob.lag)
	}

	for range 4 {
		grow(t, tree, "a", 1)
		c.Appended()
	}
	eventually(t, "Run to wait for the interval", clk.HasWaiters)
	clk.Step(interval / 2)
	if got := latestSize(c); got != 4 || !clk.HasWaiters() {
		t.Fatalf("half an interval after the last checkpoint: Latest size %d (want 4), waiting %v", got, clk.HasWaiters())
	}
	clk.Step(interval / 2)
	eventually(t, "a checkpoint of 8 records", func() bool { return latestSize(c) == 8 })
	signed, _ := c.Latest()
	wantCovers(t, signed, k, tree, 8)
	eventually(t, "Observe(8, …)", func() bool { return len(o.get()) == 2 })
	if ob := o.get()[1]; ob != (observation{8, interval}) {
		t.Errorf("Observe(%d, %v), want (8, %v)", ob.size, ob.lag, interval)
	}
	eventually(t, "the checkpoint file to cover 8 records", func() bool { return fileSize(opts.Dir, k) == 8 })
}

// TestStopSignsLastCheckpoint: closing stop signs the records appended since the last
// checkpoint at once, without waiting for the interval, and signs nothing new otherwise.
func TestStopSignsLastCheckpoint(t *testing.T) {
	tests := []struct {
		name     string
		appended int64 // records appended after the first checkpoint Run signed
		cue      bool  // whether Appended is called for them
	}{
		{"records appended and announced", 3, true},
		{"records appended, not announced yet", 2, false},
		{"nothing appended", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
			k := newKey(t, "ECDSA P-256", origin)
			tree := newTree(t, "a", 5)
			var o observer
			opts := options(t, k, &o, time.Hour, clk)
			c, err := checkpoint.New(tree, opts)
			if err != nil {
				t.Fatal(err)
			}
			stop := start(t, c)
			grow(t, tree, "a", 1)
			c.Appended()
			eventually(t, "the first checkpoint", func() bool { return latestSize(c) == 6 })
			eventually(t, "Observe(6, 0)", func() bool { return len(o.get()) == 1 })

			grow(t, tree, "a", tt.appended)
			if tt.cue {
				c.Appended()
				eventually(t, "Run to wait for the interval", clk.HasWaiters)
			}
			stop()
			want := 6 + tt.appended
			if got := latestSize(c); got != want {
				t.Fatalf("after stop, Latest size = %d, want %d", got, want)
			}
			signed, _ := c.Latest()
			wantCovers(t, signed, k, tree, want)
			if got := fileSize(opts.Dir, k); got != want {
				t.Errorf("after stop, the checkpoint file covers %d records, want %d", got, want)
			}
			obs := o.get()
			if tt.cue && (len(obs) != 2 || obs[1] != (observation{want, 0})) {
				t.Errorf("Observe calls %v, want a second one (%d, 0)", obs, want)
			}
			if tt.appended == 0 && len(obs) != 1 {
				t.Errorf("Observe calls %v: nothing was appended, want no new checkpoint", obs)
			}
		})
	}
}

// TestAtKeepsRecentCheckpoints: At finds the last 64 checkpoints signed by size and forgets
// older ones.
func TestAtKeepsRecentCheckpoints(t *testing.T) {
	k := newKey(t, "Ed25519", origin)
	tree := newTree(t, "a", 0)
	c, err := checkpoint.New(tree, options(t, k, &observer{}, time.Nanosecond, nil))
	if err != nil {
		t.Fatal(err)
	}
	start(t, c)
	const last = 69 // sizes 0 to 69: 70 checkpoints
	for size := int64(1); size <= last; size++ {
		grow(t, tree, "a", 1)
		c.Appended()
		eventually(t, fmt.Sprintf("a checkpoint of %d records", size), func() bool { return latestSize(c) == size })
	}
	for size := int64(-1); size <= last+1; size++ {
		signed, ok := c.At(size)
		if want := size >= last+1-64 && size <= last; ok != want {
			t.Errorf("At(%d) found %v, want %v (the last 64 sizes are %d to %d)", size, ok, want, last+1-64, last)
			continue
		}
		if ok {
			wantCovers(t, signed, k, tree, size)
		}
	}
}

// TestLagOfLateCue: the ledger's writer extends the tree, then calls Appended, so Run may
// sign a record before its cue arrives. That late cue must not count as a wait: the next
// checkpoint's lag is that of the records it newly covers.
func TestLagOfLateCue(t *testing.T) {
	const interval = time.Second
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	k := newKey(t, "Ed25519", origin)
	tree := newTree(t, "a", 1)
	var o observer
	c, err := checkpoint.New(tree, options(t, k, &o, interval, clk))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	grow(t, tree, "a", 1)
	c.Appended()
	eventually(t, "a checkpoint of 2 records", func() bool { return latestSize(c) == 2 })

	grow(t, tree, "a", 1)
	c.Appended()
	eventually(t, "Run to wait for the interval", clk.HasWaiters)
	grow(t, tree, "a", 1) // record 4, whose cue comes after the checkpoint that covers it
	clk.Step(interval)
	eventually(t, "a checkpoint of 4 records", func() bool { return latestSize(c) == 4 })
	c.Appended() // record 4's late cue
	eventually(t, "Run to wait for the interval", clk.HasWaiters)

	clk.Step(interval / 2)
	grow(t, tree, "a", 1) // record 5, signed as soon as it is appended
	c.Appended()
	stop()
	want := []observation{{2, 0}, {4, interval}, {5, 0}}
	if obs := o.get(); fmt.Sprint(obs) != fmt.Sprint(want) {
		t.Errorf("Observe calls %v, want %v", obs, want)
	}
}

// TestNewRemovesStaleTemporaryFiles: the temporary files of checkpoint writes a crash
// interrupted are removed at the next start.
func TestNewRemovesStaleTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, ".checkpoint.tmp-12345")
	if err := os.WriteFile(stale, []byte("half a checkpoint"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	s, err := ledgerproof.NewNoteSigner("example.com/log", key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.New(&ledgerproof.Tree{}, checkpoint.Options{Origin: "example.com/log", Signer: s, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file still there: %v", err)
	}
}

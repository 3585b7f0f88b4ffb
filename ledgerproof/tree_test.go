package ledgerproof

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestLeafHash(t *testing.T) {
	line := record(1)
	want := sha256.Sum256(append([]byte{0x00}, line...))
	for _, in := range [][]byte{line, append(bytes.Clone(line), '\n')} {
		if got := LeafHash(in); got != tlog.Hash(want) {
			t.Errorf("LeafHash(%q) = %s, want SHA-256(0x00 || line without newline) %x", in, got, want)
		}
	}
	if LeafHash(append(bytes.Clone(line), '\n', '\n')) == tlog.Hash(want) {
		t.Error("LeafHash removed more than one newline")
	}
}

func TestEmptyRoot(t *testing.T) {
	if got, want := EmptyRoot(), tlog.Hash(sha256.Sum256(nil)); got != want {
		t.Fatalf("EmptyRoot() = %s, want SHA-256(\"\") %s", got, want)
	}
	var tr Tree
	if r, err := tr.Root(); err != nil || r != EmptyRoot() {
		t.Fatalf("empty Tree.Root() = %s, %v", r, err)
	}
}

// TestRootMatchesRFC6962 compares the tree's roots with an independent recursive
// implementation of RFC 6962's MTH.
func TestRootMatchesRFC6962(t *testing.T) {
	var tr Tree
	var leaves [][]byte
	check := func(size int64) {
		t.Helper()
		want := tlog.Hash(mth(leaves[:size]))
		got, err := tr.RootAt(size)
		if err != nil || got != want {
			t.Fatalf("RootAt(%d) of %d = %s, %v; MTH = %s", size, tr.Size(), got, err, want)
		}
	}
	for n := int64(1); n <= 100; n++ {
		leaves = append(leaves, record(n))
		if _, err := tr.Append(record(n)); err != nil {
			t.Fatal(err)
		}
		root, err := tr.Root()
		if want := tlog.Hash(mth(leaves)); err != nil || root != want {
			t.Fatalf("Root() at size %d = %s, %v; MTH = %s", n, root, err, want)
		}
	}
	for size := int64(0); size <= 100; size++ {
		check(size) // earlier sizes stay answerable after later appends
	}
	if _, err := tr.RootAt(101); err == nil {
		t.Error("RootAt(Size()+1) succeeded")
	}
	if _, err := tr.RootAt(-1); err == nil {
		t.Error("RootAt(-1) succeeded")
	}
}

func TestTreeAppendRefuses(t *testing.T) {
	for name, line := range map[string][]byte{
		"empty":             nil,
		"only a newline":    []byte("\n"),
		"embedded newline":  []byte("{}\n{}"),
		"two newlines":      []byte("{}\n\n"),
		"longer than 1 MiB": bytes.Repeat([]byte("x"), MaxLeafSize+1),
	} {
		var tr Tree
		if _, err := tr.Append(line); err == nil {
			t.Errorf("%s: Append succeeded", name)
		}
		if tr.Size() != 0 {
			t.Errorf("%s: refused Append changed the size to %d", name, tr.Size())
		}
	}
	var tr Tree
	if _, err := tr.Append(bytes.Repeat([]byte("x"), MaxLeafSize)); err != nil {
		t.Errorf("Append of a 1 MiB line: %v", err)
	}
}

// inclusionSizes returns the tree sizes at which to prove leaves of an n-leaf tree.
func inclusionSizes(n int64) []int64 {
	sizes := map[int64]bool{n: true, n - 1: true, n / 2: true, 1: true}
	var out []int64
	for s := range sizes {
		if s >= 1 && s <= n {
			out = append(out, s)
		}
	}
	return out
}

// TestInclusionRoundTrip proves every leaf at several sizes of trees of many sizes, and checks
// that changing any byte of the leaf or of a proof hash, or the index, breaks the proof.
func TestInclusionRoundTrip(t *testing.T) {
	ns := []int64{}
	for n := int64(0); n <= 70; n++ {
		ns = append(ns, n)
	}
	ns = append(ns, 127, 128, 129, 1000)
	for _, n := range ns {
		tr := buildTree(t, n)
		for _, size := range inclusionSizes(n) {
			root, err := tr.RootAt(size)
			if err != nil {
				t.Fatal(err)
			}
			c := Checkpoint{Origin: testOrigin, Size: size, Hash: root}
			for i := range size {
				proof, err := tr.ProveInclusion(i, size)
				if err != nil {
					t.Fatalf("n=%d: ProveInclusion(%d, %d): %v", n, i, size, err)
				}
				leaf := record(i + 1)
				if err := VerifyInclusion(leaf, i, proof, c); err != nil {
					t.Fatalf("n=%d size=%d: leaf %d does not verify: %v", n, size, i, err)
				}
				if n > 24 && i != 0 && i != size-1 && i != size/2 {
					continue // exhaustive tampering on small trees and a sample of big ones
				}
				tamperInclusion(t, leaf, i, proof, c)
			}
		}
		if _, err := tr.ProveInclusion(n, n); err == nil {
			t.Errorf("n=%d: ProveInclusion(n, n) succeeded", n)
		}
		if _, err := tr.ProveInclusion(0, n+1); err == nil {
			t.Errorf("n=%d: ProveInclusion beyond the tree succeeded", n)
		}
	}
}

func tamperInclusion(t *testing.T, leaf []byte, i int64, proof tlog.RecordProof, c Checkpoint) {
	t.Helper()
	fail := func(what string, leaf []byte, i int64, proof tlog.RecordProof, c Checkpoint) {
		t.Helper()
		if err := VerifyInclusion(leaf, i, proof, c); !errors.Is(err, ErrNotIncluded) {
			t.Fatalf("size %d leaf %d, %s: VerifyInclusion = %v, want ErrNotIncluded", c.Size, i, what, err)
		}
	}
	for b := range leaf {
		l := bytes.Clone(leaf)
		l[b] ^= 0x01
		fail("leaf byte changed", l, i, proof, c)
	}
	for k := range proof {
		for b := range tlog.HashSize {
			p := append(tlog.RecordProof(nil), proof...)
			p[k][b] ^= 0x80
			fail("proof byte changed", leaf, i, p, c)
		}
	}
	fail("index+1", leaf, i+1, proof, c)
	fail("index-1", leaf, i-1, proof, c)
	fail("root changed", leaf, i, proof, Checkpoint{Origin: c.Origin, Size: c.Size, Hash: flipBit(c.Hash, int(i))})
	fail("extra proof hash", leaf, i, append(append(tlog.RecordProof(nil), proof...), c.Hash), c)
	if len(proof) > 0 {
		fail("proof hash dropped", leaf, i, proof[:len(proof)-1], c)
	}
}

// TestConsistencyRoundTrip proves every pair of sizes m ≤ n ≤ 40 and checks that one flipped
// bit anywhere (a proof hash, either root) breaks the proof, and that a smaller newer size is
// refused as a shrunk log.
func TestConsistencyRoundTrip(t *testing.T) {
	const maxSize = 40
	tr := buildTree(t, maxSize)
	cp := func(size int64) Checkpoint {
		h, err := tr.RootAt(size)
		if err != nil {
			t.Fatal(err)
		}
		return Checkpoint{Origin: testOrigin, Size: size, Hash: h}
	}
	for n := int64(0); n <= maxSize; n++ {
		for m := int64(0); m <= n; m++ {
			older, newer := cp(m), cp(n)
			proof, err := tr.ProveConsistency(m, n)
			if err != nil {
				t.Fatalf("ProveConsistency(%d, %d): %v", m, n, err)
			}
			if err := VerifyConsistency(older, newer, proof); err != nil {
				t.Fatalf("%d → %d does not verify: %v", m, n, err)
			}
			if m < n {
				if err := VerifyConsistency(newer, older, proof); !errors.Is(err, ErrShrunk) {
					t.Fatalf("%d → %d: VerifyConsistency = %v, want ErrShrunk", n, m, err)
				}
			}
			bad := func(what string, o, nw Checkpoint, p tlog.TreeProof) {
				t.Helper()
				if err := VerifyConsistency(o, nw, p); !errors.Is(err, ErrInconsistent) {
					t.Fatalf("%d → %d, %s: VerifyConsistency = %v, want ErrInconsistent", m, n, what, err)
				}
			}
			for k := range proof {
				for bit := 0; bit < 256; bit += 37 {
					p := append(tlog.TreeProof(nil), proof...)
					p[k] = flipBit(p[k], bit)
					bad("proof bit flipped", older, newer, p)
				}
			}
			for bit := 0; bit < 256; bit += 61 {
				if m > 0 || n == 0 { // every tree extends the empty one, whatever its root
					bad("new root bit flipped", older, Checkpoint{Origin: testOrigin, Size: n, Hash: flipBit(newer.Hash, bit)}, proof)
				}
				bad("old root bit flipped", Checkpoint{Origin: testOrigin, Size: m, Hash: flipBit(older.Hash, bit)}, newer, proof)
			}
			bad("extra proof hash", older, newer, append(append(tlog.TreeProof(nil), proof...), newer.Hash))
			if len(proof) > 0 {
				bad("proof hash dropped", older, newer, proof[1:])
			}
		}
	}
	if _, err := tr.ProveConsistency(2, 1); err == nil {
		t.Error("ProveConsistency(2, 1) succeeded")
	}
	if _, err := tr.ProveConsistency(1, maxSize+1); err == nil {
		t.Error("ProveConsistency beyond the tree succeeded")
	}
	other := cp(5)
	other.Origin = "other.example/log"
	if err := VerifyConsistency(cp(3), other, nil); !errors.Is(err, ErrOriginMismatch) {
		t.Errorf("consistency across origins = %v, want ErrOriginMismatch", err)
	}
}

// TestTreeConcurrent runs one appender and several provers; run with -race.
func TestTreeConcurrent(t *testing.T) {
	var tr Tree
	const total = 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := tr.Checkpoint(testOrigin)
				if err != nil {
					t.Error(err)
					return
				}
				if c.Size == 0 {
					continue
				}
				i := c.Size / 3
				p, err := tr.ProveInclusion(i, c.Size)
				if err == nil {
					err = VerifyInclusion(record(i+1), i, p, c)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := int64(1); i <= total; i++ {
		if _, err := tr.Append(record(i)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if tr.Size() != total {
		t.Fatalf("Size() = %d, want %d", tr.Size(), total)
	}
}

// TestTreeMemory checks the documented bound of about two stored hashes per record.
func TestTreeMemory(t *testing.T) {
	tr := buildTree(t, 4096)
	if got := len(tr.hashes); int64(got) != tlog.StoredHashCount(4096) || got >= 2*4096 {
		t.Fatalf("%d stored hashes for 4096 records, want StoredHashCount = %d < 8192", got, tlog.StoredHashCount(4096))
	}
}

// benchLine is a typical ledger line, for benchmarks.
var benchLine = []byte(`{"seq":123456,"time":"2026-11-21T10:00:07.123456789Z","decision":"refused","signer":"example.com/serving","client":"spiffe://signet/watcher","requester":"mallory","objectUID":"9a2e","reason":"POLICY_VIOLATION","message":"group system:masters is forbidden","prevHash":"` + strings.Repeat("f5", 32) + `","hash":"` + strings.Repeat("c3", 32) + `"}`)

func BenchmarkTreeAppend(b *testing.B) {
	line := benchLine
	var tr Tree
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.Append(line); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProveInclusion(b *testing.B) {
	tr := buildTree(b, 1<<16)
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		if _, err := tr.ProveInclusion(i%(1<<16), 1<<16); err != nil {
			b.Fatal(err)
		}
		i += 7919
	}
}

// TestParseHashes: hashes as the gRPC API carries them round-trip; a wrong length is refused.
func TestParseHashes(t *testing.T) {
	want := []tlog.Hash{LeafHash([]byte("a")), LeafHash([]byte("b"))}
	got, err := ParseHashes(HashBytes(want))
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ParseHashes(HashBytes(h)) = %v, %v", got, err)
	}
	if _, err := ParseHashes([][]byte{make([]byte, 31)}); !errors.Is(err, ErrMalformed) {
		t.Errorf("a 31-byte hash: %v, want ErrMalformed", err)
	}
}

// TestTreeExtends: a tree extends the checkpoints of its prefixes, and not a longer one
// (ErrShrunk) nor one of another history (ErrInconsistent).
func TestTreeExtends(t *testing.T) {
	tr := buildTree(t, 7)
	for size := range int64(8) {
		root, err := tr.RootAt(size)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Extends(Checkpoint{Origin: testOrigin, Size: size, Hash: root}); err != nil {
			t.Errorf("Extends(size %d, its own root) = %v, want nil", size, err)
		}
	}
	longer, err := buildTree(t, 8).Checkpoint(testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	err = tr.Extends(longer)
	if !errors.Is(err, ErrShrunk) || errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), "has 7 leaves, fewer than the 8") {
		t.Errorf("Extends(a checkpoint of 8) = %v, want ErrShrunk with both sizes", err)
	}
	var other Tree
	for i := range int64(5) {
		if _, err := other.Append(append(record(i+1), 'x')); err != nil {
			t.Fatal(err)
		}
	}
	forked, err := other.Checkpoint(testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := tr.RootAt(5)
	err = tr.Extends(forked)
	if !errors.Is(err, ErrInconsistent) || errors.Is(err, ErrShrunk) ||
		!strings.Contains(err.Error(), "first 5 leaves is "+own.String()+", not the checkpoint's "+forked.Hash.String()) {
		t.Errorf("Extends(another history) = %v, want ErrInconsistent with both roots", err)
	}
	if err := tr.Extends(Checkpoint{Size: -1}); !errors.Is(err, ErrMalformedCheckpoint) {
		t.Errorf("Extends(size -1) = %v, want ErrMalformedCheckpoint", err)
	}
}

package ledgerproof

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// memMax is the size of the shared in-memory reference tree.
const memMax = 210_000

var (
	memOnce   sync.Once
	memRef    *Tree       // in-memory tree of memMax records, never appended to after built
	memHashes []tlog.Hash // leaf hashes of record(1) ... record(memMax)
)

// reference returns the in-memory tree of memMax records and their leaf hashes.
func reference(t testing.TB) (*Tree, []tlog.Hash) {
	t.Helper()
	memOnce.Do(func() {
		memRef = new(Tree)
		for i := range int64(memMax) {
			h := LeafHash(record(i + 1))
			memHashes = append(memHashes, h)
			if _, err := memRef.AppendHash(h); err != nil {
				panic(err)
			}
		}
	})
	return memRef, memHashes
}

// leafHashFunc returns a leafHash function for OpenTiles over hashes that counts its calls.
func leafHashFunc(hashes []tlog.Hash, calls *[]int64) func(int64) (tlog.Hash, error) {
	return func(i int64) (tlog.Hash, error) {
		*calls = append(*calls, i)
		if i < 0 || i >= int64(len(hashes)) {
			return tlog.Hash{}, errors.New("no such leaf")
		}
		return hashes[i], nil
	}
}

// openTiles opens a tiled tree in dir at size leaves of the reference tree.
func openTiles(t testing.TB, dir string, size int64, opts TileOptions) *Tree {
	t.Helper()
	_, hashes := reference(t)
	var calls []int64
	tr, err := OpenTiles(dir, size, leafHashFunc(hashes, &calls), opts)
	if err != nil {
		t.Fatalf("OpenTiles(size %d): %v", size, err)
	}
	return tr
}

// grow appends the reference leaves from tr.Size() to size: by hash, or as lines when lines.
func grow(t testing.TB, tr *Tree, size int64, lines bool) {
	t.Helper()
	_, hashes := reference(t)
	for i := tr.Size(); i < size; i++ {
		var idx int64
		var err error
		if lines {
			idx, err = tr.Append(record(i + 1))
		} else {
			idx, err = tr.AppendHash(hashes[i])
		}
		if err != nil || idx != i {
			t.Fatalf("appending leaf %d: %d, %v", i, idx, err)
		}
	}
}

// interesting are sizes at tile boundaries of levels 0, 1 and 2.
var interesting = []int64{0, 1, 2, 255, 256, 257, 511, 512, 513, 65535, 65536, 65537, 131072, 131073}

// sameAnswers checks that tr, of size leaves, answers as the in-memory reference tree does for
// size: roots, checkpoint, Extends, leaf hashes, inclusion proofs at size and at older sizes,
// and consistency proofs from older sizes (olds, plus a few at random).
func sameAnswers(t *testing.T, tr *Tree, size int64, olds []int64, rng *rand.Rand) {
	t.Helper()
	mem, _ := reference(t)
	if got := tr.Size(); got != size {
		t.Fatalf("Size() = %d, want %d", got, size)
	}
	want := func(s int64) tlog.Hash {
		h, err := mem.RootAt(s)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if c, err := tr.Checkpoint(testOrigin); err != nil || c.Origin != testOrigin || c.Size != size || c.Hash != want(size) {
		t.Fatalf("size %d: Checkpoint = %v, %v; want root %s", size, c, err, want(size))
	}
	if r, err := tr.Root(); err != nil || r != want(size) {
		t.Fatalf("size %d: Root = %s, %v", size, r, err)
	}
	olds = append(slices.Clone(olds), 0, size, size/2, size-1)
	for range 4 {
		olds = append(olds, rng.Int64N(size+1))
	}
	for _, o := range olds {
		if o < 0 || o > size {
			continue
		}
		if r, err := tr.RootAt(o); err != nil || r != want(o) {
			t.Fatalf("size %d: RootAt(%d) = %s, %v; want %s", size, o, r, err, want(o))
		}
		if err := tr.Extends(cp(o, want(o))); err != nil {
			t.Fatalf("size %d: Extends(checkpoint at %d) = %v", size, o, err)
		}
		if err := tr.Extends(cp(o, flipBit(want(o), 3))); !errors.Is(err, ErrInconsistent) {
			t.Fatalf("size %d: Extends(wrong root at %d) = %v, want ErrInconsistent", size, o, err)
		}
		got, err1 := tr.ProveConsistency(o, size)
		exp, err2 := mem.ProveConsistency(o, size)
		if err1 != nil || err2 != nil || !slices.Equal(got, exp) {
			t.Fatalf("size %d: ProveConsistency(%d) = %v, %v; in memory %v, %v", size, o, got, err1, exp, err2)
		}
		if o == 0 {
			continue
		}
		for _, i := range []int64{0, o - 1, o / 2, rng.Int64N(o)} {
			sameInclusion(t, tr, i, o)
			sameInclusion(t, tr, i, size)
		}
	}
	if err := tr.Extends(cp(size+1, want(size+1))); !errors.Is(err, ErrShrunk) {
		t.Fatalf("size %d: Extends(a checkpoint of size+1) = %v, want ErrShrunk", size, err)
	}
}

// cp returns the checkpoint of size and root h.
func cp(size int64, h tlog.Hash) Checkpoint {
	return Checkpoint{Origin: testOrigin, Size: size, Hash: h}
}

// sameInclusion compares tr's inclusion proof and leaf hash with the reference's.
func sameInclusion(t *testing.T, tr *Tree, i, size int64) {
	t.Helper()
	mem, hashes := reference(t)
	got, err1 := tr.ProveInclusion(i, size)
	exp, err2 := mem.ProveInclusion(i, size)
	if err1 != nil || err2 != nil || !slices.Equal(got, exp) {
		t.Fatalf("ProveInclusion(%d, %d) = %v, %v; in memory %v, %v", i, size, got, err1, exp, err2)
	}
	if h, err := tr.LeafHash(i); err != nil || h != hashes[i] {
		t.Fatalf("LeafHash(%d) = %s, %v; want %s", i, h, err, hashes[i])
	}
}

// probeSizes returns the sizes to compare at: the interesting ones and n random ones up to
// max, sorted.
func probeSizes(rng *rand.Rand, n int, max int64) []int64 {
	sizes := slices.Clone(interesting)
	for range n {
		sizes = append(sizes, rng.Int64N(max+1))
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	return slices.Compact(sizes)
}

// TestTilesMatchMemory grows a tiled tree to 200,000 leaves, flushing now and then, and
// compares every answer with the in-memory tree's at the interesting sizes and at random
// ones, for the current size and for older ones (whose edges are no longer in memory).
func TestTilesMatchMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := openTiles(t, t.TempDir(), 0, TileOptions{CacheTiles: 4})
	sameAnswers(t, tr, 0, nil, rng)
	const max = 200_000
	var seen []int64
	for k, size := range probeSizes(rng, 40, max) {
		grow(t, tr, size, k%2 == 0)
		if k%3 == 0 {
			if _, err := tr.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		sameAnswers(t, tr, size, append(seen, interesting...), rng)
		seen = append(seen, size)
	}
	grow(t, tr, max, false)
	sameAnswers(t, tr, max, seen, rng)
	if st := tr.TileStats(); st.TilesRead == 0 {
		t.Errorf("TileStats() = %+v: no tile read from disk with a cache of 4", st)
	}
}

// TestTilesReopen flushes, reopens at the flushed size and at smaller ones, compares, appends
// more (other tiles than on disk, after a smaller reopen), flushes and reopens again.
func TestTilesReopen(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	tr := openTiles(t, dir, 0, TileOptions{})
	grow(t, tr, 70_000, false)
	if n, err := tr.Flush(); err != nil || n != 70_000 {
		t.Fatalf("Flush() = %d, %v; want 70000", n, err)
	}
	for _, size := range []int64{70_000, 65_537, 65_536, 65_535, 257, 256, 255, 0} {
		re := openTiles(t, dir, size, TileOptions{})
		sameAnswers(t, re, size, interesting, rng)
		grow(t, re, size+300, size%2 == 0)
		sameAnswers(t, re, size+300, interesting, rng)
	}
	re := openTiles(t, dir, 65_000, TileOptions{})
	grow(t, re, 140_000, false)
	if n, err := re.Flush(); err != nil || n != 140_000 {
		t.Fatalf("Flush() = %d, %v", n, err)
	}
	for _, size := range []int64{140_000, 131_073, 131_072, 100_001} {
		sameAnswers(t, openTiles(t, dir, size, TileOptions{CacheTiles: 1}), size, interesting, rng)
	}
	_, hashes := reference(t)
	var calls []int64
	if _, err := OpenTiles(dir, 140_000+TileWidth, leafHashFunc(hashes, &calls), TileOptions{}); !errors.Is(err, ErrMissingTile) {
		t.Errorf("OpenTiles beyond the flushed tiles = %v, want ErrMissingTile", err)
	}
}

// TestTilesAppendHash: Append(line) and AppendHash(LeafHash(line)) give one tree, in tiles
// and in memory, and Append refuses what it refused.
func TestTilesAppendHash(t *testing.T) {
	byLine := openTiles(t, t.TempDir(), 0, TileOptions{})
	byHash := openTiles(t, t.TempDir(), 0, TileOptions{})
	var mem Tree
	for i := int64(1); i <= 600; i++ {
		line := append(record(i), '\n')
		byLine.Append(line)
		byHash.AppendHash(LeafHash(line))
		mem.AppendHash(LeafHash(line))
	}
	a, _ := byLine.Root()
	b, _ := byHash.Root()
	c, _ := mem.Root()
	ref, _ := buildTree(t, 600).Root()
	if a != ref || b != ref || c != ref {
		t.Fatalf("roots %s (Append), %s (AppendHash), %s (in memory), want %s", a, b, c, ref)
	}
	if _, err := byLine.Append([]byte("a\nb")); err == nil || byLine.Size() != 600 {
		t.Fatalf("Append(two lines) = %v, size %d", err, byLine.Size())
	}
	if _, err := byLine.LeafHash(600); err == nil {
		t.Error("LeafHash(Size()) succeeded")
	}
	if _, err := mem.LeafHash(-1); err == nil {
		t.Error("LeafHash(-1) succeeded")
	}
}

// TestTreeFlushInMemory: the zero Tree's Flush is a no-op returning Size(), with no stats.
func TestTreeFlushInMemory(t *testing.T) {
	tr := buildTree(t, 300)
	if n, err := tr.Flush(); err != nil || n != 300 {
		t.Fatalf("Flush() = %d, %v; want 300", n, err)
	}
	if st := tr.TileStats(); st != (TileStats{}) {
		t.Fatalf("TileStats() = %+v, want zero", st)
	}
	if h, err := tr.LeafHash(299); err != nil || h != LeafHash(record(300)) {
		t.Fatalf("LeafHash(299) = %s, %v", h, err)
	}
}

// testRand returns a deterministic random source.
func testRand() *rand.Rand { return rand.New(rand.NewPCG(5, 6)) }

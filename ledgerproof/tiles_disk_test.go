package ledgerproof

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

var (
	flushedOnce sync.Once
	flushedDir  string // tiles of the reference tree's first flushedSize leaves; do not change
)

const flushedSize = 200_000

// flushedTiles returns a copy of a directory holding the flushed tiles of the reference
// tree's first 200,000 leaves, for a test to change.
func flushedTiles(t testing.TB) string {
	t.Helper()
	flushedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ledgerproof-tiles-")
		if err != nil {
			t.Fatal(err)
		}
		tr := openTiles(t, dir, 0, TileOptions{})
		grow(t, tr, flushedSize, false)
		if n, err := tr.Flush(); err != nil || n != flushedSize {
			t.Fatalf("Flush() = %d, %v", n, err)
		}
		flushedDir = dir
	})
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(flushedDir)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if flushedDir != "" {
		os.RemoveAll(flushedDir)
	}
	os.Exit(code)
}

func TestTilePath(t *testing.T) {
	for _, c := range []struct {
		L    int
		N    int64
		want string
	}{
		{0, 0, "tile/0/000"}, {0, 999, "tile/0/999"}, {0, 1000, "tile/0/x001/000"},
		{0, 1234067, "tile/0/x001/x234/067"}, {2, 5, "tile/2/005"},
	} {
		if got := TilePath(c.L, c.N); got != c.want {
			t.Errorf("TilePath(%d, %d) = %q, want %q", c.L, c.N, got, c.want)
		}
	}
}

// TestTileFiles: after Flush the directory holds exactly the full tiles, at C2SP paths, each
// 8192 bytes equal to tlog.ReadTileData of the in-memory tree, and no temporary file; a
// second Flush writes nothing.
func TestTileFiles(t *testing.T) {
	mem, _ := reference(t)
	dir := filepath.Join(t.TempDir(), "tiles")
	tr := openTiles(t, dir, 0, TileOptions{})
	const size = 70_000
	grow(t, tr, size, false)
	if st := tr.TileStats(); st.Pending != 273+1 {
		t.Errorf("before Flush: %+v, want 274 tiles pending", st)
	}
	if _, err := tr.Flush(); err != nil {
		t.Fatal(err)
	}
	want := map[string]tlog.Tile{}
	for L := 0; size>>(8*L) >= TileWidth; L++ {
		for N := range int64(size>>(8*L)) / TileWidth {
			want[TilePath(L, N)] = tlog.Tile{H: TileHeight, L: L, N: N, W: TileWidth}
		}
	}
	got := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		got[rel] = true
		tile, ok := want[rel]
		if !ok {
			t.Errorf("unexpected file %s", rel)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		exp, err := tlog.ReadTileData(tile, mem.reader())
		if err != nil {
			return err
		}
		if len(data) != TileBytes || !bytes.Equal(data, exp) {
			t.Errorf("%s: %d bytes, not tlog.ReadTileData's %d", rel, len(data), len(exp))
		}
		if fi, _ := d.Info(); fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v", rel, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range want {
		if !got[p] {
			t.Errorf("tile %s not written", p)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("dir: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if st := tr.TileStats(); st.TilesWritten != int64(len(want)) || st.Pending != 0 {
		t.Errorf("after Flush: %+v, want %d written, none pending", st, len(want))
	}
	if n, err := tr.Flush(); err != nil || n != size || tr.TileStats().TilesWritten != int64(len(want)) {
		t.Errorf("second Flush() = %d, %v, stats %+v: want nothing written", n, err, tr.TileStats())
	}
}

// TestOpenTilesReads: OpenTiles calls leafHash for the last size%256 leaves only, and reads
// exactly (size>>8L)%256 tiles of level L-1 for each level L ≥ 1, nothing else.
func TestOpenTilesReads(t *testing.T) {
	_, hashes := reference(t)
	dir := flushedTiles(t)
	for _, size := range []int64{200_000, 199_999, 65_535, 65_536, 65_537, 131_071, 256, 255, 0} {
		var calls []int64
		tr, err := OpenTiles(dir, size, leafHashFunc(hashes, &calls), TileOptions{})
		if err != nil {
			t.Fatalf("OpenTiles(%d): %v", size, err)
		}
		var want []int64
		for i := size &^ 255; i < size; i++ {
			want = append(want, i)
		}
		if !slices.Equal(calls, want) {
			t.Errorf("size %d: leafHash called for %v, want the %d last leaves", size, calls, size%256)
		}
		reads := int64(0)
		for L := 1; size>>(8*L) > 0; L++ {
			reads += (size >> (8 * L)) % TileWidth
		}
		if st := tr.TileStats(); st.TilesRead != reads || reads > 255*3 {
			t.Errorf("size %d: %d tiles read, want %d", size, st.TilesRead, reads)
		}
		if size == 200_000 && (len(calls) != 64 || reads != 13+3) {
			t.Errorf("at 200,000 leaves: %d leaf hashes and %d tiles", len(calls), reads)
		}
	}
}

// TestMissingTile: a tile OpenTiles reads or checks that is missing or short fails it, and
// one read later fails the proof that needs it; each error wraps ErrMissingTile and names
// the tile.
func TestMissingTile(t *testing.T) {
	_, hashes := reference(t)
	dir := flushedTiles(t)
	open := func(size int64) error {
		var calls []int64
		_, err := OpenTiles(dir, size, leafHashFunc(hashes, &calls), TileOptions{})
		return err
	}
	change := func(path string, f func(string)) (restore func()) {
		data, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		f(filepath.Join(dir, path))
		return func() { os.WriteFile(filepath.Join(dir, path), data, 0o600) }
	}
	remove := func(p string) { os.Remove(p) }
	truncate := func(p string) { os.Truncate(p, TileBytes-1) }
	for _, c := range []struct {
		size int64
		path string
		f    func(string)
	}{
		{200_000, "tile/0/770", remove},   // read for level 1's edge
		{200_000, "tile/1/001", truncate}, // read for level 2's edge
		{65_536, "tile/0/255", remove},    // the last full tile of level 0, only checked
		{65_536, "tile/0/255", truncate},
	} {
		restore := change(c.path, c.f)
		err := open(c.size)
		if !errors.Is(err, ErrMissingTile) || !strings.Contains(err.Error(), filepath.FromSlash(c.path)) {
			t.Errorf("OpenTiles(%d) without %s: %v, want ErrMissingTile naming it", c.size, c.path, err)
		}
		restore()
		if err := open(c.size); err != nil {
			t.Fatalf("OpenTiles(%d) with %s restored: %v", c.size, c.path, err)
		}
	}
	restore := change("tile/0/005", remove)
	defer restore()
	tr := openTiles(t, dir, 200_000, TileOptions{})
	if _, err := tr.Root(); err != nil {
		t.Fatalf("Root() needs no tile of level 0 but: %v", err)
	}
	_, err := tr.ProveInclusion(5*256+3, 200_000)
	if !errors.Is(err, ErrMissingTile) || !strings.Contains(err.Error(), filepath.FromSlash("tile/0/005")) {
		t.Errorf("proving a leaf of a removed tile: %v, want ErrMissingTile naming it", err)
	}
}

// TestCorruptTile: a byte changed in a tile makes Extends of a checkpoint taken before fail
// with ErrInconsistent: through the root when OpenTiles read the tile, and through the
// check against the level above (ErrCorruptTile too, naming the tile) otherwise.
func TestCorruptTile(t *testing.T) {
	mem, _ := reference(t)
	dir := flushedTiles(t)
	checkpoint := func(size int64) Checkpoint {
		h, err := mem.RootAt(size)
		if err != nil {
			t.Fatal(err)
		}
		return cp(size, h)
	}
	flip := func(path string, at int) (restore func()) {
		p := filepath.Join(dir, path)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bad := slices.Clone(data)
		bad[at] ^= 0x10
		if err := os.WriteFile(p, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		return func() { os.WriteFile(p, data, 0o600) }
	}
	for _, at := range []int{0, 4000, TileBytes - 1} {
		restore := flip("tile/1/001", at) // read by OpenTiles at 200,000: level 2's edge
		tr := openTiles(t, dir, flushedSize, TileOptions{})
		for _, size := range []int64{flushedSize, 131_072} {
			if err := tr.Extends(checkpoint(size)); !errors.Is(err, ErrInconsistent) {
				t.Errorf("byte %d of tile/1/001 changed: Extends(checkpoint at %d) = %v, want ErrInconsistent", at, size, err)
			}
		}
		restore()

		restore = flip("tile/0/005", at) // not read by OpenTiles
		tr = openTiles(t, dir, flushedSize, TileOptions{})
		err := tr.Extends(checkpoint(5*256 + 100))
		if !errors.Is(err, ErrInconsistent) || !errors.Is(err, ErrCorruptTile) || !strings.Contains(err.Error(), filepath.FromSlash("tile/0/005")) {
			t.Errorf("byte %d of tile/0/005 changed: Extends = %v, want ErrInconsistent and ErrCorruptTile naming it", at, err)
		}
		if _, err := tr.ProveInclusion(5*256+3, flushedSize); !errors.Is(err, ErrCorruptTile) {
			t.Errorf("byte %d of tile/0/005 changed: ProveInclusion = %v, want ErrCorruptTile", at, err)
		}
		restore()
		tr = openTiles(t, dir, flushedSize, TileOptions{})
		if err := tr.Extends(checkpoint(5*256 + 100)); err != nil {
			t.Errorf("tile/0/005 restored: Extends = %v", err)
		}
	}
}

// TestTilesReadOnly: a read-only tree creates no directory, appends in memory, answers as the
// in-memory tree, and its Flush refuses and writes nothing.
func TestTilesReadOnly(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	tr := openTiles(t, missing, 0, TileOptions{ReadOnly: true})
	grow(t, tr, 600, true)
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only OpenTiles made %s: %v", missing, err)
	}

	dir := flushedTiles(t)
	before := countFiles(t, dir)
	tr = openTiles(t, dir, 70_000, TileOptions{ReadOnly: true})
	grow(t, tr, 70_600, false)
	sameAnswers(t, tr, 70_600, interesting, testRand())
	if n, err := tr.Flush(); err == nil || n != 70_000 {
		t.Errorf("read-only Flush() = %d, %v; want 70000 and an error", n, err)
	}
	if st := tr.TileStats(); st.Pending != 2 || st.TilesWritten != 0 {
		t.Errorf("read-only: %+v, want 2 pending, none written", st)
	}
	if after := countFiles(t, dir); after != before {
		t.Errorf("read-only tree: %d files, was %d", after, before)
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

package ledgerproof

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// TileHeight is the height of the tree's tiles (C2SP tlog-tiles): a full tile holds
// TileWidth = 256 hashes of one tree level 8L, TileBytes = 8192 bytes.
const (
	TileHeight = 8
	TileWidth  = 1 << TileHeight
	TileBytes  = TileWidth * tlog.HashSize
)

// The errors of a tree in tiles. They are about local storage, not about what a checkpoint or
// a proof says, so they are not among the verification sentinels of errors.go.
var (
	// ErrMissingTile: a full tile the tree needs is not on disk, or is not 8192 bytes.
	// The message names the tile's path.
	ErrMissingTile = errors.New("missing tile")
	// ErrCorruptTile: a full tile read from disk does not hash to the entry for it in the
	// level above (a tile of level L+1, or the right edge in memory): the file was changed
	// after it was written. The message names the tile's path.
	ErrCorruptTile = errors.New("corrupt tile")
)

// TileOptions configure OpenTiles.
type TileOptions struct {
	// ReadOnly: never write tiles or create dir (offline audit tools). Append still works,
	// in memory: the full tiles it completes stay in memory, and Flush refuses.
	ReadOnly bool
	// CacheTiles bounds the full tiles read from disk kept in memory for reading, least
	// recently used evicted first; 64 (1 MiB) when zero or negative.
	CacheTiles int
	// Storage keeps the full tiles instead of files under dir (which is then not used).
	Storage TileStorage
}

// TileStats counts a tiled tree's tile I/O, for tests and metrics.
type TileStats struct {
	TilesRead    int64 // full tiles read from disk since OpenTiles
	TilesWritten int64 // full tiles written by Flush since OpenTiles
	Pending      int   // full tiles completed and not yet flushed, held in memory
	Cached       int   // full tiles read or flushed, held in the cache
}

// OpenTiles opens the tree stored under dir as C2SP tlog-tiles, at size leaves; dir is created
// (mode 0700) unless opts.ReadOnly. Tiles are tile/<L>/<N> under dir (C2SP paths, N in groups
// of three digits, "x" before all but the last: N=1234067 is x001/x234/067), each a full
// tile of 256 hashes of tree level 8L (tlog.ReadTileData). Partial tiles are never written:
// the right edge of each level (fewer than 256 hashes) lives only in memory.
//
// Every full tile within the first size leaves must be on disk (written by an earlier Flush
// at a size of at least size). OpenTiles rebuilds the right edge: the last size%256 leaf
// hashes come from leafHash (called only for those indexes, at most 255 calls; leafHash may
// be nil when size%256 is 0), and the partial row of each level L ≥ 1 is the roots of the
// last full tiles of level L-1 (at most 255 tile reads per level). It also checks that the
// last full tile of each level exists (a stat). Nothing else is read. A missing or short tile
// is an error wrapping ErrMissingTile naming the tile path.
//
// OpenTiles trusts the tiles it reads: a changed one changes the root, and a checkpoint taken
// before then no longer verifies (Extends). Every other tile is checked when read, against
// the hash above it, and refused (ErrCorruptTile) if it was changed.
//
// Memory: each level's edge takes 16 KiB (its partial row and the complete subtrees inside
// it), as does each full tile pending Flush and each cached one (the 256 hashes and the 255
// above them). A tree of 10 M leaves has three levels (48 KiB) and, with the default cache,
// about 1 MiB of cached tiles, against 640 MiB in memory.
func OpenTiles(dir string, size int64, leafHash func(index int64) (tlog.Hash, error), opts TileOptions) (*Tree, error) {
	if size < 0 {
		return nil, fmt.Errorf("opening tiles in %s: size %d is negative", dir, size)
	}
	storage := opts.Storage
	if storage == nil {
		if !opts.ReadOnly {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("opening tiles: %w", err)
			}
		}
		storage = NewFileTiles(dir)
	}
	cache := opts.CacheTiles
	if cache <= 0 {
		cache = 64
	}
	ts := &tileState{store: newTileStore(storage, cache), readOnly: opts.ReadOnly, durable: size}
	where := fmt.Sprint(storage) // the directory, or what stands for it
	for L := 0; L == 0 || size>>(TileHeight*L) > 0; L++ {
		count := size >> (TileHeight * L) // hashes at tree level 8L
		e := edgeTile{nodes: new(tileNodes)}
		for i := count &^ (TileWidth - 1); i < count; i++ {
			h, err := ts.edgeHash(L, i, leafHash)
			if err != nil {
				return nil, fmt.Errorf("opening tiles in %s at size %d: %w", where, size, err)
			}
			e.nodes.set(e.n, h)
			e.n++
		}
		if count >= TileWidth {
			if err := ts.store.storage.HasTile(L, count/TileWidth-1); err != nil {
				return nil, fmt.Errorf("opening tiles in %s at size %d: %w", where, size, err)
			}
		}
		ts.edge = append(ts.edge, e)
	}
	return &Tree{size: size, tiles: ts}, nil
}

// edgeHash returns hash i of tree level 8L for OpenTiles: a leaf hash from leafHash, or the
// root of full tile i of level L-1.
func (ts *tileState) edgeHash(L int, i int64, leafHash func(int64) (tlog.Hash, error)) (tlog.Hash, error) {
	if L > 0 {
		nodes, err := ts.store.full(L-1, i, nil)
		if err != nil {
			return tlog.Hash{}, err
		}
		return nodes.root(), nil
	}
	if leafHash == nil {
		return tlog.Hash{}, fmt.Errorf("hash of leaf %d: no leafHash function", i)
	}
	h, err := leafHash(i)
	if err != nil {
		return tlog.Hash{}, fmt.Errorf("hash of leaf %d: %w", i, err)
	}
	return h, nil
}

// tileState is the tiled storage of a Tree.
type tileState struct {
	edge     []edgeTile // per level L, its incomplete tile; guarded by Tree.mu
	store    *tileStore // full tiles: pending, cached, on disk; its own lock
	readOnly bool

	flushMu sync.Mutex // one Flush at a time
	durable int64      // size up to which every full tile is on disk; guarded by flushMu

	flushing func() // tests: called by Flush between taking the pending tiles and writing them
}

// tileNodes holds every stored hash of one tile of level L: its 256 bottom hashes (tree
// level 8L), then the hashes of its complete subtrees of 2, 4, ..., 256 of them (tree levels
// 8L+1 to 8L+8): level k (0 to 8) of the tile at nodeOffset(k).
type tileNodes [2*TileWidth - 1]tlog.Hash

// nodeOffset is where level k of a tile starts in tileNodes.
func nodeOffset(k int) int { return 2*TileWidth - (2*TileWidth)>>k }

// set stores bottom hash i of the tile, the hashes 0 to i-1 being set, and the hashes of the
// subtrees it completes.
func (nodes *tileNodes) set(i int, h tlog.Hash) {
	nodes[i] = h
	for k := 0; k < TileHeight && i&1 == 1; k++ {
		left, right := nodes[nodeOffset(k)+i-1], nodes[nodeOffset(k)+i]
		i >>= 1
		nodes[nodeOffset(k+1)+i] = tlog.NodeHash(left, right)
	}
}

// root is the hash of the full tile as one subtree: set only once all 256 are.
func (nodes *tileNodes) root() tlog.Hash { return nodes[nodeOffset(TileHeight)] }

// edgeTile is the incomplete tile at the right edge of a level: n < 256 bottom hashes set.
// Appends set entries n and above only, and a full tile's nodes move to the pending tiles and
// are replaced by new ones, so a copy of an edgeTile stays valid to read without the lock.
type edgeTile struct {
	nodes *tileNodes
	n     int
}

// append adds leaf n's hash h; called with Tree.mu held for writing. Each tile it completes
// goes to the pending tiles, and its root up to the next level.
func (ts *tileState) append(n int64, h tlog.Hash) {
	count := n + 1 // hashes of tree level 8L after this append
	for L := 0; ; L++ {
		if L == len(ts.edge) {
			ts.edge = append(ts.edge, edgeTile{nodes: new(tileNodes)})
		}
		e := &ts.edge[L]
		e.nodes.set(e.n, h)
		e.n++
		if e.n < TileWidth {
			return
		}
		ts.store.addPending(L, count/TileWidth-1, e.nodes)
		h = e.nodes.root()
		*e = edgeTile{nodes: new(tileNodes)}
		count /= TileWidth
	}
}

// view returns a reader of the tree's stored hashes at size; called with Tree.mu held.
func (ts *tileState) view(size int64) *tileView {
	return &tileView{size: size, edge: append([]edgeTile(nil), ts.edge...), store: ts.store}
}

// tileView reads the stored hashes of the tree of size leaves from a copy of its edge and
// from the full tiles, without the tree's lock.
type tileView struct {
	size  int64
	edge  []edgeTile
	store *tileStore
}

// ReadHashes implements tlog.HashReader.
func (v *tileView) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 {
			return nil, fmt.Errorf("stored hash %d is negative", x)
		}
		level, n := tlog.SplitStoredHashIndex(x)
		h, err := v.hash(level, n)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// hash returns the hash of the complete subtree n of tree level level: hash n<<k to
// (n+1)<<k - 1 of tree level 8L, level = 8L + k, in one tile.
func (v *tileView) hash(level int, n int64) (tlog.Hash, error) {
	L, k := level/TileHeight, level%TileHeight
	if L >= len(v.edge) || n >= v.size>>level { // not (n+1)<<level ≤ size
		return tlog.Hash{}, fmt.Errorf("no complete subtree %d of level %d in a tree of %d leaves", n, level, v.size)
	}
	N := (n << k) / TileWidth // the tile
	nodes := v.edge[L].nodes
	if (N+1)*TileWidth <= v.size>>(TileHeight*L) { // a full tile
		var err error
		nodes, err = v.store.full(L, N, v.parent)
		if err != nil {
			return tlog.Hash{}, err
		}
	}
	return nodes[nodeOffset(k)+int(n-N<<(TileHeight-k))], nil
}

// parent returns the hash that full tile N of level L must have: hash N of level L+1.
func (v *tileView) parent(L int, N int64) (tlog.Hash, error) {
	return v.hash(TileHeight*(L+1), N)
}

// Flush writes every full tile completed since the last Flush (the pending tiles), each
// durably: to a temporary file in its directory, fsync, rename, then fsync of the directories
// changed. It returns the tree size up to which all full tiles are now durable: the size when
// the Flush started (appends may go on meanwhile; their tiles wait for the next Flush). The
// partial right edge is never written: reopening at that size rebuilds it (OpenTiles).
// Flush is safe to call concurrently with Append and readers; Flushes run one at a time, and
// no lock is held during I/O. On error it returns the size of the last successful Flush (or
// of OpenTiles) and keeps every pending tile for the next Flush. It refuses when opened
// ReadOnly. For the in-memory tree it is a no-op that returns Size().
func (t *Tree) Flush() (int64, error) {
	ts := t.tiles
	if ts == nil {
		return t.Size(), nil
	}
	ts.flushMu.Lock()
	defer ts.flushMu.Unlock()
	if ts.readOnly {
		return ts.durable, fmt.Errorf("flushing tiles in %v: opened read-only", ts.store.storage)
	}
	t.mu.RLock()
	size := t.size
	batch := ts.store.pendingTiles() // every full tile of size not flushed before
	t.mu.RUnlock()
	if ts.flushing != nil {
		ts.flushing()
	}
	if err := ts.store.write(batch); err != nil {
		return ts.durable, fmt.Errorf("flushing tiles at size %d: %w", size, err)
	}
	ts.durable = size
	return size, nil
}

// TileStats returns the tile I/O counts of a tree in tiles (zero for the in-memory tree).
func (t *Tree) TileStats() TileStats {
	if t.tiles == nil {
		return TileStats{}
	}
	return t.tiles.store.stats()
}

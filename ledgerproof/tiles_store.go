package ledgerproof

import (
	"cmp"
	"container/list"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/mod/sumdb/tlog"
)

// TilePath returns the C2SP tlog-tiles path of full tile N of level L: "tile/<L>/<N>", N
// written in groups of three digits with an "x" before all but the last (N=1234067 is
// "tile/0/x001/x234/067"). It is tlog.Tile.Path without the height that sumdb's paths add.
func TilePath(L int, N int64) string {
	p := tlog.Tile{H: TileHeight, L: L, N: N, W: TileWidth}.Path() // tile/8/<L>/<N>
	return "tile/" + strings.TrimPrefix(p, fmt.Sprintf("tile/%d/", TileHeight))
}

// tileKey names full tile N of level L.
type tileKey struct {
	L int
	N int64
}

// tileStore holds the full tiles of a tree: pending flush, cached, and on disk. The tiles
// in it never change; a tile read from disk is cached only once checked.
type tileStore struct {
	storage TileStorage

	mu       sync.Mutex
	pending  map[tileKey]*tileNodes // completed by appends, not yet flushed
	lru      *list.List             // of cachedTile, most recently used first
	cached   map[tileKey]*list.Element
	cacheMax int

	read, written atomic.Int64
}

// cachedTile is an element of the cache's list.
type cachedTile struct {
	key   tileKey
	nodes *tileNodes
}

func newTileStore(storage TileStorage, cacheMax int) *tileStore {
	return &tileStore{
		storage:  storage,
		pending:  map[tileKey]*tileNodes{},
		lru:      list.New(),
		cached:   map[tileKey]*list.Element{},
		cacheMax: cacheMax,
	}
}

// addPending queues a tile an append completed for Flush.
func (s *tileStore) addPending(L int, N int64, nodes *tileNodes) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[tileKey{L, N}] = nodes
}

// pendingTiles lists the tiles waiting for Flush, by level then index.
func (s *tileStore) pendingTiles() []cachedTile {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := slices.SortedFunc(maps.Keys(s.pending), func(a, b tileKey) int {
		return cmp.Or(cmp.Compare(a.L, b.L), cmp.Compare(a.N, b.N))
	})
	out := make([]cachedTile, len(keys))
	for i, k := range keys {
		out[i] = cachedTile{k, s.pending[k]}
	}
	return out
}

// full returns full tile N of level L: pending, cached, or read from disk. A tile read from
// disk is checked against parent(L, N), the hash it must have, unless parent is nil
// (OpenTiles, whose edge is made of those tiles' hashes).
func (s *tileStore) full(L int, N int64, parent func(int, int64) (tlog.Hash, error)) (*tileNodes, error) {
	key := tileKey{L, N}
	s.mu.Lock()
	if nodes, ok := s.pending[key]; ok {
		s.mu.Unlock()
		return nodes, nil
	}
	if e, ok := s.cached[key]; ok {
		s.lru.MoveToFront(e)
		s.mu.Unlock()
		return e.Value.(cachedTile).nodes, nil
	}
	s.mu.Unlock()

	nodes, err := s.readTile(L, N)
	if err != nil {
		return nil, err
	}
	if parent != nil {
		want, err := parent(L, N)
		if err != nil {
			return nil, err
		}
		if got := nodes.root(); got != want {
			return nil, fmt.Errorf("%w %s: it hashes to %s, the tree above it holds %s", ErrCorruptTile, s.storage.Name(L, N), got, want)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache(key, nodes)
	return nodes, nil
}

// cache adds a tile to the cache, evicting the least recently used; called with s.mu held.
func (s *tileStore) cache(key tileKey, nodes *tileNodes) {
	if e, ok := s.cached[key]; ok {
		s.lru.MoveToFront(e)
		return
	}
	s.cached[key] = s.lru.PushFront(cachedTile{key, nodes})
	for s.lru.Len() > s.cacheMax {
		old := s.lru.Remove(s.lru.Back()).(cachedTile)
		delete(s.cached, old.key)
	}
}

// readTile reads full tile N of level L from storage and computes its subtrees.
func (s *tileStore) readTile(L int, N int64) (*tileNodes, error) {
	data, err := s.storage.ReadTile(L, N)
	if err != nil {
		return nil, err
	}
	if len(data) != TileBytes {
		return nil, fmt.Errorf("%w %s: %d bytes, not the %d of a full tile", ErrMissingTile, s.storage.Name(L, N), len(data), TileBytes)
	}
	s.read.Add(1)
	nodes := new(tileNodes)
	for i := range TileWidth {
		nodes.set(i, tlog.Hash(data[i*tlog.HashSize:(i+1)*tlog.HashSize]))
	}
	return nodes, nil
}

// write stores the tiles durably, then moves them from pending to the cache. On error the
// tiles stay pending.
func (s *tileStore) write(batch []cachedTile) error {
	tiles := make([]Tile, len(batch))
	for i, t := range batch {
		tiles[i] = Tile{L: t.key.L, N: t.key.N, Data: tileData(t.nodes)}
	}
	if err := s.storage.WriteTiles(tiles); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range batch {
		delete(s.pending, t.key)
		s.cache(t.key, t.nodes)
	}
	s.written.Add(int64(len(batch)))
	return nil
}

// tileData is the content of a full tile: its 256 bottom hashes.
func tileData(nodes *tileNodes) []byte {
	data := make([]byte, 0, TileBytes)
	for _, h := range nodes[:TileWidth] {
		data = append(data, h[:]...)
	}
	return data
}

// stats returns the counts of TileStats.
func (s *tileStore) stats() TileStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return TileStats{
		TilesRead:    s.read.Load(),
		TilesWritten: s.written.Load(),
		Pending:      len(s.pending),
		Cached:       s.lru.Len(),
	}
}

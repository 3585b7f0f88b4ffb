package ledgerproof

import (
	"cmp"
	"container/list"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
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
	dir string

	mu       sync.Mutex
	pending  map[tileKey]*tileNodes // completed by appends, not yet flushed
	lru      *list.List             // of cachedTile, most recently used first
	cached   map[tileKey]*list.Element
	cacheMax int

	read, written atomic.Int64
	made          map[string]bool // directories write made (Flush serializes writes)
}

// cachedTile is an element of the cache's list.
type cachedTile struct {
	key   tileKey
	nodes *tileNodes
}

func newTileStore(dir string, cacheMax int) *tileStore {
	return &tileStore{
		dir:      filepath.Clean(dir),
		pending:  map[tileKey]*tileNodes{},
		made:     map[string]bool{},
		lru:      list.New(),
		cached:   map[tileKey]*list.Element{},
		cacheMax: cacheMax,
	}
}

// file is the file of tile N of level L.
func (s *tileStore) file(L int, N int64) string {
	return filepath.Join(s.dir, filepath.FromSlash(TilePath(L, N)))
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
			return nil, fmt.Errorf("%w %s: it hashes to %s, the tree above it holds %s", ErrCorruptTile, s.file(L, N), got, want)
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

// readTile reads full tile N of level L from disk and computes its subtrees.
func (s *tileStore) readTile(L int, N int64) (*tileNodes, error) {
	path := s.file(L, N)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w %s: not on disk", ErrMissingTile, path)
	case err != nil:
		return nil, fmt.Errorf("reading tile: %w", err)
	case len(data) != TileBytes:
		return nil, fmt.Errorf("%w %s: %d bytes, not the %d of a full tile", ErrMissingTile, path, len(data), TileBytes)
	}
	s.read.Add(1)
	nodes := new(tileNodes)
	for i := range TileWidth {
		nodes.set(i, tlog.Hash(data[i*tlog.HashSize:(i+1)*tlog.HashSize]))
	}
	return nodes, nil
}

// stat checks that full tile N of level L is on disk, without reading it.
func (s *tileStore) stat(L int, N int64) error {
	path := s.file(L, N)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w %s: not on disk", ErrMissingTile, path)
	case err != nil:
		return fmt.Errorf("checking tile: %w", err)
	case fi.Size() != TileBytes:
		return fmt.Errorf("%w %s: %d bytes, not the %d of a full tile", ErrMissingTile, path, fi.Size(), TileBytes)
	}
	return nil
}

// write writes the tiles durably, then moves them from pending to the cache. On error the
// tiles stay pending. Each tile goes to a temporary file that is renamed once written and
// synced; the files are all written before any is synced, so that one journal commit of the
// file system covers many of them (a sync each, one after another, costs a commit each).
func (s *tileStore) write(batch []cachedTile) (err error) {
	dirs := map[string]bool{}
	temps := make([]*os.File, 0, len(batch))
	defer func() {
		for _, f := range temps {
			if f != nil {
				f.Close()
				if err != nil {
					os.Remove(f.Name())
				}
			}
		}
	}()
	for _, t := range batch {
		path := s.file(t.key.L, t.key.N)
		f, err := s.writeTemp(path, tileData(t.nodes))
		if err != nil {
			return err
		}
		temps = append(temps, f)
		for d := filepath.Dir(path); len(d) > len(s.dir); d = filepath.Dir(d) {
			dirs[d] = true
		}
		dirs[s.dir] = true
	}
	for i, f := range temps {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("writing tile %s: %w", s.file(batch[i].key.L, batch[i].key.N), err)
		}
	}
	for i, f := range temps {
		path := s.file(batch[i].key.L, batch[i].key.N)
		if err := f.Close(); err != nil {
			return fmt.Errorf("writing tile %s: %w", path, err)
		}
		temps[i] = nil
		if err := os.Rename(f.Name(), path); err != nil {
			os.Remove(f.Name())
			return fmt.Errorf("writing tile: %w", err)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := syncDir(d); err != nil {
			return err
		}
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

// writeTemp writes data to a new temporary file beside path, creating the directory the first
// time, and returns the file, open and not yet synced.
func (s *tileStore) writeTemp(path string, data []byte) (*os.File, error) {
	dir := filepath.Dir(path)
	if !s.made[dir] {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("writing tile: %w", err)
		}
		s.made[dir] = true
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("writing tile: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("writing tile %s: %w", path, err)
	}
	return f, nil
}

// tileData is the content of a full tile: its 256 bottom hashes.
func tileData(nodes *tileNodes) []byte {
	data := make([]byte, 0, TileBytes)
	for _, h := range nodes[:TileWidth] {
		data = append(data, h[:]...)
	}
	return data
}

// syncDir fsyncs a directory, making the renames and creations in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing tile directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing tile directory %s: %w", dir, err)
	}
	return nil
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

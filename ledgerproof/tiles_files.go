package ledgerproof

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// TileStorage keeps the full tiles of a tiled tree (OpenTiles): files under a directory by
// default (FileTiles), or another store, such as a fleet's database.
type TileStorage interface {
	// ReadTile returns full tile N of level L (TileBytes bytes). A tile not stored fails with
	// an error wrapping ErrMissingTile.
	ReadTile(L int, N int64) ([]byte, error)
	// HasTile checks that full tile N of level L is stored and whole, reading as little as
	// it can (ErrMissingTile otherwise).
	HasTile(L int, N int64) error
	// WriteTiles stores full tiles, durably before it returns.
	WriteTiles(tiles []Tile) error
	// Name names tile N of level L in messages.
	Name(L int, N int64) string
}

// Tile is one full tile to store: its level, index, and the 256 hashes of its bottom row.
type Tile struct {
	L    int
	N    int64
	Data []byte
}

// FileTiles stores tiles as files under a directory, at their C2SP paths (TilePath).
type FileTiles struct {
	dir  string
	made map[string]bool // directories made (WriteTiles calls are serialized by Flush)
}

// NewFileTiles returns the file storage of tiles under dir.
func NewFileTiles(dir string) *FileTiles {
	return &FileTiles{dir: filepath.Clean(dir), made: map[string]bool{}}
}

// Name is the file of tile N of level L.
func (s *FileTiles) Name(L int, N int64) string {
	return filepath.Join(s.dir, filepath.FromSlash(TilePath(L, N)))
}

// ReadTile reads the tile's file.
func (s *FileTiles) ReadTile(L int, N int64) ([]byte, error) {
	path := s.Name(L, N)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w %s: not on disk", ErrMissingTile, path)
	case err != nil:
		return nil, fmt.Errorf("reading tile: %w", err)
	}
	return data, nil
}

// HasTile checks the tile's file and its size.
func (s *FileTiles) HasTile(L int, N int64) error {
	path := s.Name(L, N)
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

// WriteTiles writes each tile to a temporary file that is renamed once written and synced;
// the files are all written before any is synced, so that one journal commit of the file
// system covers many of them (a sync each, one after another, costs a commit each); then the
// directories are synced.
func (s *FileTiles) WriteTiles(tiles []Tile) (err error) {
	dirs := map[string]bool{}
	temps := make([]*os.File, 0, len(tiles))
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
	for _, t := range tiles {
		path := s.Name(t.L, t.N)
		f, err := s.writeTemp(path, t.Data)
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
			return fmt.Errorf("writing tile %s: %w", s.Name(tiles[i].L, tiles[i].N), err)
		}
	}
	for i, f := range temps {
		path := s.Name(tiles[i].L, tiles[i].N)
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
	return nil
}

// writeTemp writes data to a new temporary file beside path, creating the directory the first
// time, and returns the file, open and not yet synced.
func (s *FileTiles) writeTemp(path string, data []byte) (*os.File, error) {
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

// String names the storage in messages.
func (s *FileTiles) String() string { return s.dir }

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

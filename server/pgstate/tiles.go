package pgstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/ledgerproof"
)

// Tiles keeps the fleet's tree tiles in the tree_tiles table (ledgerproof.TileStorage).
type Tiles struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

// NewTiles returns the tile storage of the database pool reaches.
func NewTiles(pool *pgxpool.Pool) *Tiles { return &Tiles{pool: pool, timeout: 10 * time.Second} }

// Name names a tile in messages.
func (s *Tiles) Name(L int, N int64) string { return fmt.Sprintf("tree_tiles (level %d, n %d)", L, N) }

// String names the storage in messages.
func (s *Tiles) String() string { return "the fleet's tree_tiles" }

// ReadTile reads one tile.
func (s *Tiles) ReadTile(L int, N int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM tree_tiles WHERE level = $1 AND n = $2`, L, N).Scan(&data)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("%w %s: not stored", ledgerproof.ErrMissingTile, s.Name(L, N))
	case err != nil:
		return nil, fmt.Errorf("reading tile %s: %w: %w", s.Name(L, N), ErrUnavailable, err)
	}
	return data, nil
}

// HasTile checks that one tile is stored (the table holds only whole tiles).
func (s *Tiles) HasTile(L int, N int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM tree_tiles WHERE level = $1 AND n = $2`, L, N).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w %s: not stored", ledgerproof.ErrMissingTile, s.Name(L, N))
	case err != nil:
		return fmt.Errorf("checking tile %s: %w: %w", s.Name(L, N), ErrUnavailable, err)
	}
	return nil
}

// WriteTiles stores tiles in one transaction. A tile is a function of the records below it,
// so a tile already stored (by an integrator before this one) is kept as it is.
func (s *Tiles) WriteTiles(tiles []ledgerproof.Tile) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, t := range tiles {
			b.Queue(`INSERT INTO tree_tiles (level, n, data) VALUES ($1, $2, $3) ON CONFLICT (level, n) DO NOTHING`, t.L, t.N, t.Data)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("writing %d tiles: %w: %w", len(tiles), ErrUnavailable, err)
	}
	return nil
}

package pgstate

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger/record"
	"github.com/signet-pki/signet/server/pgstate/ledgertable"
)

// OpenTree opens the fleet's Merkle tree at size leaves (the latest checkpoint's): its full
// tiles from tree_tiles, and the leaves of its right edge (at most 255) from the records
// after the last full tile. It reads nothing else, whatever the history.
func OpenTree(ctx context.Context, pool *pgxpool.Pool, size int64) (*ledgerproof.Tree, error) {
	first := size &^ (ledgerproof.TileWidth - 1) // leaves before first are in full tiles
	edge := make([]tlog.Hash, 0, size-first)
	rows, err := pool.Query(ctx, `SELECT seq, line FROM ledger_records WHERE seq > $1 AND seq <= $2 ORDER BY seq`, first, size)
	if err != nil {
		return nil, fmt.Errorf("opening the fleet's tree: %w: %w", ErrUnavailable, err)
	}
	for rows.Next() {
		var seq int64
		var line []byte
		if err := rows.Scan(&seq, &line); err != nil {
			rows.Close()
			return nil, fmt.Errorf("opening the fleet's tree: %w", err)
		}
		if seq != first+int64(len(edge))+1 {
			rows.Close()
			return nil, fmt.Errorf("opening the fleet's tree: record %d follows %d", seq, first+int64(len(edge)))
		}
		edge = append(edge, ledgerproof.LeafHash(line))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("opening the fleet's tree: %w: %w", ErrUnavailable, err)
	}
	if int64(len(edge)) != size-first {
		return nil, fmt.Errorf("opening the fleet's tree at size %d: the journal holds %d of its last %d records", size, len(edge), size-first)
	}
	tree, err := ledgerproof.OpenTiles("", size, func(i int64) (tlog.Hash, error) {
		if i < first || i >= size {
			return tlog.Hash{}, fmt.Errorf("leaf %d is not on the tree's right edge", i)
		}
		return edge[i-first], nil
	}, ledgerproof.TileOptions{Storage: NewTiles(pool)})
	if err != nil {
		return nil, fmt.Errorf("opening the fleet's tree: %w", err)
	}
	return tree, nil
}

// Integrate appends to tree the leaves of the records stored after its size, up to max of
// them, in seq order, and stores the full tiles they complete. It returns the tree's size
// then: a checkpoint of that size may be signed. Each record is checked first as the next of
// the hash chain (ledgertable.CheckNext): a checkpoint never covers a record that was changed
// in the database, or does not follow the one before it.
func Integrate(ctx context.Context, pool *pgxpool.Pool, tree *ledgerproof.Tree, max int) (int64, error) {
	size := tree.Size()
	prev := record.ZeroHash
	// The record at size too (its hash column): the first new record must follow it.
	rows, err := pool.Query(ctx, `SELECT seq, line, hash FROM ledger_records WHERE seq >= $1 ORDER BY seq LIMIT $2`, size, max+1)
	if err != nil {
		return size, fmt.Errorf("integrating the journal: %w: %w", ErrUnavailable, err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var line []byte
		var hash string
		if err := rows.Scan(&seq, &line, &hash); err != nil {
			return tree.Size(), fmt.Errorf("integrating the journal: %w", err)
		}
		if seq == size && size > 0 {
			prev = hash
			continue
		}
		if seq != tree.Size()+1 {
			return tree.Size(), fmt.Errorf("integrating the journal: record %d follows %d (a gap in the journal)", seq, tree.Size())
		}
		r, err := ledgertable.CheckNext(line, uint64(tree.Size()), prev)
		if err != nil {
			return tree.Size(), fmt.Errorf("integrating the journal: %w", err)
		}
		if _, err := tree.AppendHash(ledgerproof.LeafHash(line)); err != nil {
			return tree.Size(), fmt.Errorf("integrating record %d: %w", seq, err)
		}
		prev = r.Hash
	}
	if err := rows.Err(); err != nil {
		return tree.Size(), fmt.Errorf("integrating the journal: %w: %w", ErrUnavailable, err)
	}
	rows.Close()
	if _, err := tree.Flush(); err != nil {
		return tree.Size(), fmt.Errorf("integrating the journal: %w", err)
	}
	return tree.Size(), nil
}

package ledgertable

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Head is the journal's last record: its seq and hash (0 and 64 zeros when empty).
type Head struct {
	Seq  uint64
	Hash string
}

// ReadHead returns the journal's head.
func ReadHead(ctx context.Context, q Querier) (Head, error) {
	var seq int64
	var h Head
	if err := q.QueryRow(ctx, `SELECT seq, hash FROM ledger_head WHERE id`).Scan(&seq, &h.Hash); err != nil {
		return Head{}, fmt.Errorf("reading the journal's head: %w", err)
	}
	h.Seq = uint64(seq)
	return h, nil
}

// Querier is a pool or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// exportPage is how many records one query of Export reads.
const exportPage = 4096

// Export reads the head, then calls fn with every record up to it (seq 1 to the head's), in
// seq order, with its line as stored (the tree's leaf, without a newline). Records are read a
// page at a time, each page its own query, so an export of millions of records holds neither
// them in memory nor a snapshot for its whole length. Records never change once stored and
// the head moves only once its records are committed, so what Export passes is a consistent
// prefix of the history, however many servers append meanwhile: every record up to the head
// it read, and nothing after. It checks that the seqs run without a gap and that the last
// record's hash is the head's. It stops at fn's first error and returns it wrapped.
func Export(ctx context.Context, pool *pgxpool.Pool, fn func(seq uint64, line []byte) error) (Head, error) {
	head, err := ReadHead(ctx, pool)
	if err != nil {
		return Head{}, fmt.Errorf("exporting the journal: %w", err)
	}
	var last uint64
	lastHash := ""
	for last < head.Seq {
		rows, err := pool.Query(ctx, `SELECT seq, line, hash FROM ledger_records WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3`,
			int64(last), int64(head.Seq), exportPage)
		if err != nil {
			return head, fmt.Errorf("exporting the journal after record %d: %w", last, err)
		}
		n := 0
		for rows.Next() {
			var seq int64
			var line []byte
			if err := rows.Scan(&seq, &line, &lastHash); err != nil {
				rows.Close()
				return head, fmt.Errorf("exporting the journal after record %d: %w", last, err)
			}
			if uint64(seq) != last+1 {
				rows.Close()
				return head, fmt.Errorf("exporting the journal: record %d follows %d — the journal has a gap", seq, last)
			}
			if err := fn(uint64(seq), line); err != nil {
				rows.Close()
				return head, fmt.Errorf("exporting the journal: record %d: %w", seq, err)
			}
			last = uint64(seq)
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return head, fmt.Errorf("exporting the journal after record %d: %w", last, err)
		}
		if n == 0 {
			return head, fmt.Errorf("exporting the journal: its head is record %d but it holds records only up to %d", head.Seq, last)
		}
	}
	if head.Seq > 0 && lastHash != head.Hash {
		return head, fmt.Errorf("exporting the journal: record %d has hash %s, its head says %s", head.Seq, lastHash, head.Hash)
	}
	return head, nil
}

// LatestCheckpoint returns the largest signed checkpoint stored (size -1 and nil when none).
func LatestCheckpoint(ctx context.Context, q Querier) (size int64, signed []byte, err error) {
	err = q.QueryRow(ctx, `SELECT size, signed FROM checkpoints ORDER BY size DESC LIMIT 1`).Scan(&size, &signed)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reading the latest checkpoint: %w", err)
	}
	return size, signed, nil
}

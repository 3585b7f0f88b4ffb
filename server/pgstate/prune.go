package pgstate

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// KeepCheckpoints is how many of the latest signed checkpoints Prune keeps (GetCheckpoint and
// the proofs of a size ask for one of them; the file ledger keeps 64).
const KeepCheckpoints = 1024

// pruneBatch bounds the answers one Prune deletes, so that it never holds many locks.
const pruneBatch = 10_000

// Prune deletes what the fleet no longer needs, so that the database grows with the ledger
// alone: answers older than the retention (issued before before, or claims whose lease ran out
// before it; at most pruneBatch a call) and signed checkpoints beyond the latest
// KeepCheckpoints. The journal's records are never deleted. Any server may run it; running it
// on several at once only repeats work.
func Prune(ctx context.Context, pool *pgxpool.Pool, before time.Time) (answers, checkpoints int64, err error) {
	// The age is tested again on the row deleted: one claimed or answered anew since the
	// subquery read it stays.
	tag, err := pool.Exec(ctx, `DELETE FROM answers WHERE scope IN (
		SELECT scope FROM answers WHERE coalesce(issued_at, lease_until) < $1 LIMIT $2) AND coalesce(issued_at, lease_until) < $1`, before, pruneBatch)
	if err != nil {
		return 0, 0, fmt.Errorf("pruning answers: %w: %w", ErrUnavailable, err)
	}
	answers = tag.RowsAffected()
	tag, err = pool.Exec(ctx, `DELETE FROM checkpoints WHERE size < (
		SELECT size FROM checkpoints ORDER BY size DESC OFFSET $1 LIMIT 1)`, KeepCheckpoints-1)
	if err != nil {
		return answers, 0, fmt.Errorf("pruning checkpoints: %w: %w", ErrUnavailable, err)
	}
	return answers, tag.RowsAffected(), nil
}

package pgstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrDeposed: this server no longer holds the integrator lease (it ran out and another
// server took it, or it never held it): it must not sign or store a checkpoint.
var ErrDeposed = errors.New("this server is not the fleet's integrator")

// ErrCheckpointShrinks: a checkpoint smaller than one already stored was offered.
var ErrCheckpointShrinks = errors.New("a checkpoint smaller than the latest stored")

// Integrator is this server's part in choosing the fleet's one integrator, the server that
// builds the Merkle tree and signs checkpoints: a lease in the integrator_lease row, whose
// fence grows with every change of holder. A checkpoint is stored with the fence it was
// signed under, and only while that fence is the lease's: a deposed integrator (paused past
// its lease, cut off from the database) cannot store one after its successor has begun.
type Integrator struct {
	pool   *pgxpool.Pool
	holder string
	lease  time.Duration
}

// NewIntegrator returns holder's part (a name unique to this server process) with the given
// lease length.
func NewIntegrator(pool *pgxpool.Pool, holder string, lease time.Duration) *Integrator {
	return &Integrator{pool: pool, holder: holder, lease: lease}
}

// Acquire takes the lease if it is free or has run out, and returns its new fence; ok is false
// when another server holds it.
func (g *Integrator) Acquire(ctx context.Context) (fence int64, ok bool, err error) {
	err = g.pool.QueryRow(ctx, `UPDATE integrator_lease SET holder = $1, fence = fence + 1,
			expires = now() + make_interval(secs => $2)
		WHERE id AND (holder IS NULL OR expires < now()) RETURNING fence`, g.holder, g.lease.Seconds()).Scan(&fence)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("taking the integrator lease: %w: %w", ErrUnavailable, err)
	}
	return fence, true, nil
}

// Renew extends the lease held with fence, or fails with ErrDeposed.
func (g *Integrator) Renew(ctx context.Context, fence int64) error {
	err := g.pool.QueryRow(ctx, `UPDATE integrator_lease SET expires = now() + make_interval(secs => $3)
		WHERE id AND holder = $1 AND fence = $2 AND expires >= now() RETURNING fence`, g.holder, fence, g.lease.Seconds()).Scan(&fence)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("renewing the integrator lease (fence %d): %w", fence, ErrDeposed)
	case err != nil:
		return fmt.Errorf("renewing the integrator lease: %w: %w", ErrUnavailable, err)
	}
	return nil
}

// Release gives the lease up (a clean stop), so that another server takes it at once.
func (g *Integrator) Release(ctx context.Context, fence int64) error {
	if _, err := g.pool.Exec(ctx, `UPDATE integrator_lease SET holder = NULL, expires = '-infinity'
		WHERE id AND holder = $1 AND fence = $2`, g.holder, fence); err != nil {
		return fmt.Errorf("releasing the integrator lease: %w: %w", ErrUnavailable, err)
	}
	return nil
}

// StoreCheckpoint stores the signed checkpoint of the tree of size records, signed under
// fence, in a transaction that first locks the lease and checks that fence is still this
// server's and unexpired (ErrDeposed otherwise), and that no larger checkpoint is stored
// (ErrCheckpointShrinks; one of the same size is kept as it is).
func (g *Integrator) StoreCheckpoint(ctx context.Context, fence, size int64, signed []byte) error {
	err := pgx.BeginFunc(ctx, g.pool, func(tx pgx.Tx) error {
		var holder *string
		var current int64
		var live bool
		if err := tx.QueryRow(ctx, `SELECT holder, fence, expires >= now() FROM integrator_lease WHERE id FOR UPDATE`).
			Scan(&holder, &current, &live); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if holder == nil || *holder != g.holder || current != fence || !live {
			return fmt.Errorf("storing the checkpoint of size %d under fence %d (the lease's is %d): %w", size, fence, current, ErrDeposed)
		}
		var latest int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(size), -1) FROM checkpoints`).Scan(&latest); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if size < latest {
			return fmt.Errorf("storing the checkpoint of size %d: %w (%d)", size, ErrCheckpointShrinks, latest)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO checkpoints (size, signed, fence) VALUES ($1, $2, $3) ON CONFLICT (size) DO NOTHING`,
			size, signed, fence); err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storing a checkpoint: %w", err)
	}
	return nil
}

// LatestCheckpoint returns the largest stored checkpoint (size -1 and nil when none).
func LatestCheckpoint(ctx context.Context, pool *pgxpool.Pool) (size int64, signed []byte, err error) {
	err = pool.QueryRow(ctx, `SELECT size, signed FROM checkpoints ORDER BY size DESC LIMIT 1`).Scan(&size, &signed)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reading the latest checkpoint: %w: %w", ErrUnavailable, err)
	}
	return size, signed, nil
}

package pgstate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/signet-pki/signet/ledgerproof"
)

// IntegratorLoop is a server's part as the fleet's integrator: it competes for the lease; while
// it holds it, it folds new records into the tree, signs a checkpoint of each new size and
// stores it under its fence, renewing the lease every round. A deposed server drops its tree;
// the next holder reopens the tree at the latest checkpoint, so no checkpoint is ever signed
// for a tree that does not extend the one before.
type IntegratorLoop struct {
	Integrator *Integrator
	// Origin is the checkpoints' origin; Sign signs one (the checkpoint key).
	Origin string
	Sign   func(ledgerproof.Checkpoint) ([]byte, error)
	// Verifier checks the latest checkpoint when the lease is taken (nil: not checked).
	Verifier note.Verifier
	// Interval is the time between rounds (200 ms when zero); Batch the records folded in a
	// round at most (65,536 when zero).
	Interval time.Duration
	Batch    int
	// Log is for lease changes and failures (slog.Default when nil); Stored, if set, is
	// called with each checkpoint stored.
	Log    *slog.Logger
	Stored func(size int64)
}

// Run runs rounds until ctx ends; it then releases the lease if it holds it.
func (l *IntegratorLoop) Run(ctx context.Context) {
	interval, log := l.Interval, l.Log
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	if log == nil {
		log = slog.Default()
	}
	var (
		tree   *ledgerproof.Tree
		fence  int64
		signed int64 = -1
	)
	drop := func(why string, err error) {
		if tree != nil {
			log.Warn("integrator: stepping down", "fence", fence, "why", why, "error", err)
		}
		tree, fence = nil, 0
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if tree == nil {
			if err := l.take(ctx, &tree, &fence, &signed); err != nil && !errors.Is(err, context.Canceled) {
				log.Warn("integrator: taking the lease failed", "error", err)
			} else if tree != nil {
				log.Info("integrator: this server integrates the fleet's journal", "fence", fence, "size", tree.Size())
			}
		}
		if tree != nil {
			if err := l.round(ctx, tree, fence, &signed); err != nil {
				drop("round failed", err)
			}
		}
		select {
		case <-ctx.Done():
			if fence != 0 {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				_ = l.Integrator.Release(rctx, fence)
				cancel()
			}
			return
		case <-t.C:
		}
	}
}

// take acquires the lease if it is free, and opens the tree at the latest checkpoint.
func (l *IntegratorLoop) take(ctx context.Context, tree **ledgerproof.Tree, fence, signed *int64) error {
	f, ok, err := l.Integrator.Acquire(ctx)
	if err != nil || !ok {
		return err
	}
	size, latest, err := LatestCheckpoint(ctx, l.Integrator.pool)
	if err != nil {
		return err
	}
	tr, err := OpenTree(ctx, l.Integrator.pool, max(size, 0))
	if err != nil {
		return err
	}
	// The tree opened from the stored tiles must be the latest checkpoint's: a new integrator
	// never signs a tree that does not extend what was signed.
	if size > 0 && l.Verifier != nil {
		c, err := ledgerproof.OpenCheckpoint(latest, l.Origin, l.Verifier)
		if err != nil {
			return fmt.Errorf("%w: the latest checkpoint: %w", ErrCheckpointMismatch, err)
		}
		mine, err := tr.Checkpoint(l.Origin)
		if err != nil {
			return err
		}
		if mine.Size != c.Size || mine.Hash != c.Hash {
			return fmt.Errorf("%w: the stored tree's root at size %d is not the latest checkpoint's", ErrCheckpointMismatch, size)
		}
	}
	*tree, *fence, *signed = tr, f, size
	return nil
}

// round renews the lease, folds new records in and stores a checkpoint of a new size.
func (l *IntegratorLoop) round(ctx context.Context, tree *ledgerproof.Tree, fence int64, signed *int64) error {
	if err := l.Integrator.Renew(ctx, fence); err != nil {
		return err
	}
	size, err := Integrate(ctx, l.Integrator.pool, tree, l.batch())
	if err != nil {
		return err
	}
	if size <= *signed {
		return nil
	}
	c, err := tree.Checkpoint(l.Origin)
	if err != nil {
		return err
	}
	note, err := l.Sign(c)
	if err != nil {
		return err
	}
	if err := l.Integrator.StoreCheckpoint(ctx, fence, c.Size, note); err != nil {
		return err
	}
	*signed = c.Size
	if l.Stored != nil {
		l.Stored(c.Size)
	}
	return nil
}

func (l *IntegratorLoop) batch() int {
	if l.Batch <= 0 {
		return 1 << 16
	}
	return l.Batch
}

package pgstate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/pgtest"
)

// TestIntegratorLeaseFencesCheckpoints: one integrator at a time; a deposed one (paused past
// its lease) can neither renew nor store a checkpoint once another took the lease, whose
// checkpoints are stored; checkpoints never shrink; a released lease is taken at once.
func TestIntegratorLeaseFencesCheckpoints(t *testing.T) {
	s := pgtest.Start(t)
	pool := migrated(t, s, "integrator")
	ctx := context.Background()
	a := NewIntegrator(pool, "server-a", time.Second)
	b := NewIntegrator(secondPool(t, s, "integrator"), "server-b", time.Second)
	fa, ok, err := a.Acquire(ctx)
	if err != nil || !ok {
		t.Fatalf("A takes the free lease: %d, %t, %v", fa, ok, err)
	}
	if _, ok, err := b.Acquire(ctx); err != nil || ok {
		t.Fatalf("B while A holds the lease: %t, %v; want refused", ok, err)
	}
	if err := a.StoreCheckpoint(ctx, fa, 10, []byte("cp 10 by A")); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx, fa); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // A pauses past its lease
	fb, ok, err := b.Acquire(ctx)
	if err != nil || !ok || fb <= fa {
		t.Fatalf("B after A's lease ran out: fence %d (A's %d), %t, %v", fb, fa, ok, err)
	}
	if err := a.StoreCheckpoint(ctx, fa, 11, []byte("cp 11 by A")); !errors.Is(err, ErrDeposed) {
		t.Fatalf("deposed A stores a checkpoint: %v, want ErrDeposed", err)
	}
	if err := a.Renew(ctx, fa); !errors.Is(err, ErrDeposed) {
		t.Fatalf("deposed A renews: %v, want ErrDeposed", err)
	}
	if err := b.StoreCheckpoint(ctx, fb, 9, []byte("cp 9 by B")); !errors.Is(err, ErrCheckpointShrinks) {
		t.Fatalf("a smaller checkpoint: %v, want ErrCheckpointShrinks", err)
	}
	if err := b.StoreCheckpoint(ctx, fb, 12, []byte("cp 12 by B")); err != nil {
		t.Fatal(err)
	}
	if size, signed, err := LatestCheckpoint(ctx, pool); err != nil || size != 12 || string(signed) != "cp 12 by B" {
		t.Fatalf("latest checkpoint: %d %q, %v", size, signed, err)
	}
	if err := b.Release(ctx, fb); err != nil {
		t.Fatal(err)
	}
	if fa2, ok, err := a.Acquire(ctx); err != nil || !ok || fa2 <= fb {
		t.Fatalf("A after B released: fence %d (B's %d), %t, %v", fa2, fb, ok, err)
	}
}

package pgstate

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/ledgerproof"
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

// TestIntegratorBuildsTheFleetsTree: the integrator folds the records two servers appended
// into the tree (tiles in the database), and signs a checkpoint; the tree reopened at that
// size from the tiles and the last records has the root of the tree built from every record,
// proves a record's inclusion against the signed root, and grows consistently.
func TestIntegratorBuildsTheFleetsTree(t *testing.T) {
	s := pgtest.Start(t)
	pool := migrated(t, s, "tree")
	ctx := context.Background()
	journals := []*Journal{NewJournal(pool, JournalOptions{}), NewJournal(secondPool(t, s, "tree"), JournalOptions{})}
	appendN := func(n int) {
		var wg sync.WaitGroup
		for k, j := range journals {
			wg.Go(func() {
				for i := range n / 2 {
					if _, err := j.Append(ctx, issued(k, i)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	appendN(700)
	g := NewIntegrator(pool, "server-a", 30*time.Second)
	fence, ok, err := g.Acquire(ctx)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	tree, err := OpenTree(ctx, pool, 0)
	if err != nil {
		t.Fatal(err)
	}
	if size, err := Integrate(ctx, pool, tree, 1<<20); err != nil || size != 700 {
		t.Fatalf("Integrate = %d, %v; want 700", size, err)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ledgerproof.NewNoteSigner("signet-ledger/fleet-test", priv)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tree.Checkpoint("signet-ledger/fleet-test")
	if err != nil {
		t.Fatal(err)
	}
	signed, err := ledgerproof.SignCheckpoint(c, signer)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.StoreCheckpoint(ctx, fence, c.Size, signed); err != nil {
		t.Fatal(err)
	}

	var all ledgerproof.Tree
	lines := map[int64][]byte{}
	for seq, line := range storedLines(t, pool) {
		if _, err := all.Append(line); err != nil {
			t.Fatal(err)
		}
		lines[int64(seq)+1] = line
	}
	want, _ := all.Root()
	reopened, err := OpenTree(ctx, pool, 700)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := reopened.Root(); err != nil || got != want || c.Hash != want {
		t.Fatalf("the reopened tree's root %v (%v), the checkpoint's %v; want the root of every record, %v", got, err, c.Hash, want)
	}
	proof, err := reopened.ProveInclusion(4, 700)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckRecord(proof, 700, c.Hash, 4, ledgerproof.LeafHash(lines[5])); err != nil {
		t.Fatalf("record 5's proof against the signed checkpoint: %v", err)
	}
	appendN(100)
	if size, err := Integrate(ctx, pool, reopened, 1<<20); err != nil || size != 800 {
		t.Fatalf("Integrate after 100 more = %d, %v", size, err)
	}
	newRoot, _ := reopened.Root()
	cons, err := reopened.ProveConsistency(700, 800)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(cons, 800, newRoot, 700, c.Hash); err != nil {
		t.Fatalf("700 → 800 is not consistent: %v", err)
	}
}

// storedLines returns every stored line in seq order.
func storedLines(t *testing.T, pool *pgxpool.Pool) [][]byte {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT line FROM ledger_records ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

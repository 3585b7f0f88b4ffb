package pgstate

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
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

// TestIntegratorFailover: two servers run the integrator loop while records are appended;
// the integrator is killed (its loop stops without releasing the lease, as a crashed process);
// the other server takes over within the lease plus a round (target: 10 s) and goes on. Every
// stored checkpoint is a prefix of one tree: its root is the root, at its size, of the tree of
// every record.
func TestIntegratorFailover(t *testing.T) {
	s := pgtest.Start(t)
	pool := migrated(t, s, "failover")
	ctx := context.Background()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	const origin = "signet-ledger/fleet-test"
	signer, err := ledgerproof.NewNoteSigner(origin, priv)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(c ledgerproof.Checkpoint) ([]byte, error) { return ledgerproof.SignCheckpoint(c, signer) }
	verifier, err := ledgerproof.NewNoteVerifier(origin, priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	stored := make(chan string, 1024)
	loop := func(name string, p *pgxpool.Pool) *IntegratorLoop {
		return &IntegratorLoop{Integrator: NewIntegrator(p, name, 2*time.Second), Origin: origin, Sign: sign, Verifier: verifier,
			Interval: 100 * time.Millisecond, Stored: func(int64) { stored <- name }}
	}
	stopAppending := make(chan struct{})
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		j := NewJournal(pool, JournalOptions{})
		for i := 0; ; i++ {
			select {
			case <-stopAppending:
				return
			default:
			}
			if _, err := j.Append(ctx, issued(0, i)); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	// A has a pool of its own: killing A closes it, so that A's loop ends without releasing
	// the lease, as a process that died.
	poolA := secondPool(t, s, "failover")
	actxA, stopA := context.WithCancel(ctx)
	doneA := make(chan struct{})
	go func() { defer close(doneA); loop("server-a", poolA).Run(actxA) }()
	waitFor := func(who string, within time.Duration) time.Duration {
		start := time.Now()
		deadline := time.After(within)
		for {
			select {
			case name := <-stored:
				if name == who {
					return time.Since(start)
				}
			case <-deadline:
				t.Fatalf("no checkpoint by %s within %s", who, within)
			}
		}
	}
	waitFor("server-a", 10*time.Second)
	bctx, stopB := context.WithCancel(ctx)
	doneB := make(chan struct{})
	go func() { defer close(doneB); loop("server-b", secondPool(t, s, "failover")).Run(bctx) }()
	waitFor("server-a", 5*time.Second) // B runs beside A, which keeps the lease
	poolA.Close()
	stopA()
	<-doneA
	// The fault struck as a crash: A's loop ended and its lease is still A's, not released,
	// so B must wait for it to run out.
	var holder string
	var live bool
	if err := pool.QueryRow(ctx, `SELECT coalesce(holder, ''), expires > now() FROM integrator_lease`).Scan(&holder, &live); err != nil ||
		holder != "server-a" || !live {
		t.Fatalf("after A was killed the lease is %q (live %t, %v); want A's, live", holder, live, err)
	}
	took := waitFor("server-b", 10*time.Second)
	t.Logf("failover: server B stored its first checkpoint %s after A was killed (lease 2 s)", took)
	waitFor("server-b", 5*time.Second)
	close(stopAppending)
	<-appended
	stopB()
	<-doneB

	var all ledgerproof.Tree
	for _, line := range storedLines(t, pool) {
		if _, err := all.Append(line); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := pool.Query(ctx, `SELECT size, signed, fence FROM checkpoints ORDER BY size`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n, fences := 0, map[int64]bool{}
	for rows.Next() {
		var size, fence int64
		var note []byte
		if err := rows.Scan(&size, &note, &fence); err != nil {
			t.Fatal(err)
		}
		c, err := ledgerproof.OpenCheckpoint(note, origin, verifier)
		if err != nil || c.Size != size {
			t.Fatalf("checkpoint %d: %+v, %v", size, c, err)
		}
		if want, err := all.RootAt(size); err != nil || want != c.Hash {
			t.Fatalf("checkpoint %d (fence %d) is not a prefix of the journal's tree: %v, %v", size, fence, c.Hash, err)
		}
		n++
		fences[fence] = true
	}
	if n < 4 || len(fences) < 2 {
		t.Fatalf("%d checkpoints under fences %v; want several, under both integrators", n, fences)
	}
}

// TestIntegrateRefusesAChangedRecord: a record changed in the database (its line no longer
// hashes to its hash) stops the tree before it, naming it, so no checkpoint ever covers it; a
// record whose prevHash does not chain is refused the same way.
func TestIntegrateRefusesAChangedRecord(t *testing.T) {
	s := pgtest.Start(t)
	pool := migrated(t, s, "changed")
	ctx := context.Background()
	j := NewJournal(pool, JournalOptions{})
	for i := 1; i <= 10; i++ {
		if _, err := j.Append(ctx, issued(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE ledger_records SET line = convert_to(replace(convert_from(line, 'UTF8'), 'watcher-1', 'watcher-9'), 'UTF8') WHERE seq = 5`); err != nil {
		t.Fatal(err)
	}
	tree, err := OpenTree(ctx, pool, 0)
	if err != nil {
		t.Fatal(err)
	}
	size, err := Integrate(ctx, pool, tree, 100)
	if err == nil || size != 4 || !strings.Contains(err.Error(), "record 5: hash mismatch") {
		t.Fatalf("Integrate over a changed record 5 = size %d, %v; want it stopped at 4, naming the record", size, err)
	}
	// Put it back: the tree goes on from 4, checked against record 4's hash.
	if _, err := pool.Exec(ctx, `UPDATE ledger_records SET line = convert_to(replace(convert_from(line, 'UTF8'), 'watcher-9', 'watcher-1'), 'UTF8') WHERE seq = 5`); err != nil {
		t.Fatal(err)
	}
	if size, err := Integrate(ctx, pool, tree, 100); err != nil || size != 10 {
		t.Fatalf("Integrate after the record was restored = size %d, %v; want 10", size, err)
	}
}

// TestIntegratorRefusesAStoredTreeThatIsNotTheCheckpoints: a new integrator reopens the tree
// from what the database holds and checks its root against the latest signed checkpoint; with
// a record of it changed in the database it signs nothing.
func TestIntegratorRefusesAStoredTreeThatIsNotTheCheckpoints(t *testing.T) {
	s := pgtest.Start(t)
	pool := migrated(t, s, "reopen")
	ctx := context.Background()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	const origin = "signet-ledger/reopen-test"
	signer, _ := ledgerproof.NewNoteSigner(origin, priv)
	verifier, _ := ledgerproof.NewNoteVerifier(origin, priv.Public())
	j := NewJournal(pool, JournalOptions{})
	for i := 1; i <= 10; i++ {
		if _, err := j.Append(ctx, issued(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, d time.Duration) {
		lctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		(&IntegratorLoop{Integrator: NewIntegrator(pool, name, time.Second), Origin: origin, Verifier: verifier, Interval: 50 * time.Millisecond,
			Sign: func(c ledgerproof.Checkpoint) ([]byte, error) { return ledgerproof.SignCheckpoint(c, signer) }}).Run(lctx)
	}
	run("a", time.Second)
	if size, _, err := LatestCheckpoint(ctx, pool); err != nil || size != 10 {
		t.Fatalf("the first integrator's checkpoint: %d, %v", size, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE ledger_records SET line = convert_to(replace(convert_from(line, 'UTF8'), 'watcher-1', 'watcher-9'), 'UTF8') WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, issued(1, 11)); err != nil {
		t.Fatal(err)
	}
	run("b", 3*time.Second) // past a's lease, which its end may not have released
	if size, _, err := LatestCheckpoint(ctx, pool); err != nil || size != 10 {
		t.Fatalf("after record 3 was changed, the next integrator signed size %d (%v); want nothing past 10", size, err)
	}
}

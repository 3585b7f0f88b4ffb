package ledgermove_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/checkpoint"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/ledger/record"
	"github.com/signet-pki/signet/server/ledgermove"
	"github.com/signet-pki/signet/server/pgstate"
	"github.com/signet-pki/signet/server/pgstate/ledgertable"
)

const origin = "signet.example/ledger"

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// fleetDB creates database name on s, migrated.
func fleetDB(t *testing.T, s *pgtest.Server, name string) *pgxpool.Pool {
	t.Helper()
	pool := s.NewDatabase(t, name)
	ms, err := pgstate.Migrations()
	if err == nil {
		_, err = pgstate.Migrate(context.Background(), pool, ms)
	}
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

func rec(i int) record.Record {
	if i%4 == 0 {
		return record.Record{Decision: record.Refused, Signer: "example.com/s", ObjectUID: fmt.Sprintf("uid-%05d", i), Reason: "POLICY_VIOLATION", Message: strings.Repeat("m", 200)}
	}
	return record.Record{Decision: record.Issued, Signer: "example.com/s", ObjectUID: fmt.Sprintf("uid-%05d", i), Serial: fmt.Sprintf("%x", i+1),
		CA: strings.Repeat("a", 64), NotAfter: t0.Add(time.Duration(i) * time.Minute), Certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}
}

// hostLedger writes n records to a file ledger in small segments and returns its directory
// and the checkpoint of its tree signed with key.
func hostLedger(t *testing.T, n int, key ed25519.PrivateKey) (string, []byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "host")
	clk := testclock.NewFakeClock(t0)
	l, err := ledger.Open(dir, ledger.Options{Clock: clk, SegmentSize: 64 << 10, Preallocate: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 1; i <= n; i++ {
		clk.Step(time.Second)
		if _, err := l.Append(context.Background(), rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, sign(t, l.Tree(), key)
}

func sign(t *testing.T, tree *ledgerproof.Tree, key ed25519.PrivateKey) []byte {
	t.Helper()
	c, err := tree.Checkpoint(origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ledgerproof.NewNoteSigner(origin, key)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := ledgerproof.SignCheckpoint(c, s)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// lines returns the lines of the ledger in dir (verified as a chain).
func lines(t *testing.T, dir string) [][]byte {
	t.Helper()
	var out [][]byte
	if _, err := ledger.Leaves(dir, func(_ ledger.Record, line []byte) { out = append(out, bytes.Clone(line)) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// integrate is the fleet's integrator's round: the tree of every record, signed with key and
// stored. It returns the signed checkpoint.
func integrate(t *testing.T, pool *pgxpool.Pool, key ed25519.PrivateKey) []byte {
	t.Helper()
	ctx := context.Background()
	g := pgstate.NewIntegrator(pool, "test", time.Minute)
	fence, ok, err := g.Acquire(ctx)
	if err != nil || !ok {
		t.Fatalf("Acquire: %t, %v", ok, err)
	}
	tree, err := pgstate.OpenTree(ctx, pool, 0)
	if err != nil {
		t.Fatal(err)
	}
	size, err := pgstate.Integrate(ctx, pool, tree, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	signed := sign(t, tree, key)
	if err := g.StoreCheckpoint(ctx, fence, size, signed); err != nil {
		t.Fatal(err)
	}
	return signed
}

// TestRoundTrip: a host's ledger imported into a fleet's database and exported again gives
// the same lines byte for byte (in several segments), a ledger Verify and Open accept, and a
// directory against which the fleet's checkpoint (written as its checkpoint file) and the
// host's own earlier checkpoint both verify, the fleet signing with the host's key: the
// fleet's tree is the host's, extended by the records it appended. An export taken while two
// servers append is a consistent prefix.
func TestRoundTrip(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	v, err := ledgerproof.NewNoteVerifier(origin, key.Public())
	if err != nil {
		t.Fatal(err)
	}
	host, hostCheckpoint := hostLedger(t, 800, key)
	pool := fleetDB(t, s, "fleet")
	im, err := ledgermove.Import(ctx, pool, host)
	if err != nil || im.Records != 800 || im.Segments < 3 {
		t.Fatalf("Import: %+v, %v", im, err)
	}
	j := pgstate.NewJournal(pool, pgstate.JournalOptions{})
	for i := 801; i <= 830; i++ {
		if _, err := j.Append(ctx, rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	fleetCheckpoint := integrate(t, pool, key)
	for i := 831; i <= 840; i++ { // after the checkpoint: exported, not covered by it
		if _, err := j.Append(ctx, rec(i)); err != nil {
			t.Fatal(err)
		}
	}

	out := filepath.Join(t.TempDir(), "export")
	ex, err := ledgermove.Export(ctx, pool, out, ledger.Options{SegmentSize: 64 << 10})
	if err != nil || ex.Records != 840 || ex.Checkpoint != 830 || ex.Segments < 3 {
		t.Fatalf("Export: %+v, %v", ex, err)
	}
	src, got := lines(t, host), lines(t, out)
	if len(got) != 840 {
		t.Fatalf("exported %d lines, want 840", len(got))
	}
	for i := range src {
		if !bytes.Equal(src[i], got[i]) {
			t.Fatalf("record %d changed on the way:\nhost   %s\nexport %s", i+1, src[i], got[i])
		}
	}
	stored, err := os.ReadFile(filepath.Join(out, checkpoint.FileName))
	if err != nil || !bytes.Equal(stored, fleetCheckpoint) {
		t.Fatalf("the export's checkpoint file: %v; want the fleet's latest checkpoint", err)
	}
	l, err := ledger.Open(out, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.CheckFile(l.Tree(), out, origin, v); err != nil {
		t.Errorf("the fleet's checkpoint against the export: %v", err)
	}
	if err := checkpoint.Check(l.Tree(), hostCheckpoint, origin, v, "the host's checkpoint"); err != nil {
		t.Errorf("the host's checkpoint against the export: %v", err)
	}
	l.Close()

	// While two servers append: a consistent prefix.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var appended atomic.Int64
	for server := range 2 {
		j := pgstate.NewJournal(pool, pgstate.JournalOptions{})
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if _, err := j.Append(ctx, rec(10000*(server+1)+i)); err != nil {
					t.Error(err)
					return
				}
				appended.Add(1)
			}
		})
	}
	for appended.Load() < 20 {
		time.Sleep(5 * time.Millisecond)
	}
	busy := filepath.Join(t.TempDir(), "busy")
	ex, err = ledgermove.Export(ctx, pool, busy, ledger.Options{})
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ledger.Verify(busy)
	if err != nil || rep.Records != ex.Records || ex.Records <= 840 {
		t.Fatalf("export while appending: %+v, verify %+v, %v", ex, rep, err)
	}
	for i, line := range lines(t, busy) {
		var row []byte
		if err := pool.QueryRow(ctx, `SELECT line FROM ledger_records WHERE seq = $1`, i+1).Scan(&row); err != nil || !bytes.Equal(row, line) {
			t.Fatalf("exported record %d is not the stored one (%v)", i+1, err)
		}
	}
}

// TestImportRefuses: a database that holds a ledger, a ledger a server has open, and a
// ledger whose chain is broken (named, nothing stored); and an export whose fleet checkpoint
// does not match the records (ErrCheckpointMismatch, and no checkpoint file).
func TestImportRefuses(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	host, _ := hostLedger(t, 100, key)
	pool := fleetDB(t, s, "fleet")
	if _, err := ledgermove.Import(ctx, pool, host); err != nil {
		t.Fatal(err)
	}
	if _, err := ledgermove.Import(ctx, pool, host); !errors.Is(err, ledgertable.ErrNotEmpty) {
		t.Errorf("a second import: %v, want ErrNotEmpty", err)
	}
	empty := fleetDB(t, s, "empty")
	l, err := ledger.Open(host, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledgermove.Import(ctx, empty, host); !errors.Is(err, ledger.ErrLocked) {
		t.Errorf("import of a ledger a server has open: %v, want ErrLocked", err)
	}
	l.Close()

	// Record 40 rewritten and re-hashed: record 41 no longer links to it.
	seg := filepath.Join(host, "ledger-000001.jsonl")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	all := lines(t, host)
	r40, _, err := record.Decode(all[39])
	if err != nil {
		t.Fatal(err)
	}
	r40.ObjectUID = "another"
	resealed, err := r40.Seal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(seg, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, bytes.Replace(data, append(all[39], '\n'), resealed, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ledgermove.Import(ctx, empty, host)
	if err == nil || !strings.Contains(err.Error(), "record 41") || !strings.Contains(err.Error(), "chain broken") {
		t.Fatalf("import of a broken ledger: %v; want the broken link of record 41 named", err)
	}
	if h, err := ledgertable.ReadHead(ctx, empty); err != nil || h.Seq != 0 {
		t.Fatalf("after the refused import the head is %+v, %v", h, err)
	}

	// A checkpoint of another tree stored in the fleet's database.
	var other ledgerproof.Tree
	for i := range 100 {
		other.Append(fmt.Appendf(nil, "leaf %d", i))
	}
	if _, err := pool.Exec(ctx, `INSERT INTO checkpoints (size, signed, fence) VALUES (100, $1, 1)`, sign(t, &other, key)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "export")
	if _, err := ledgermove.Export(ctx, pool, out, ledger.Options{}); !errors.Is(err, ledgermove.ErrCheckpointMismatch) {
		t.Fatalf("export with a checkpoint of another tree: %v, want ErrCheckpointMismatch", err)
	}
	if _, err := os.Stat(filepath.Join(out, checkpoint.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mismatched checkpoint was written: %v", err)
	}
}

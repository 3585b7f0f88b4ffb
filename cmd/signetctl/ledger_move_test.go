package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/pgstate"
)

// migratedDB creates database name on s and migrates it as a fleet server would.
func migratedDB(t *testing.T, s *pgtest.Server, name string) *pgxpool.Pool {
	t.Helper()
	pool := createdDB(t, s, name)
	ms, err := pgstate.Migrations()
	if err == nil {
		_, err = pgstate.Migrate(context.Background(), pool, ms)
	}
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// createdDB creates database name on s, empty.
func createdDB(t *testing.T, s *pgtest.Server, name string) *pgxpool.Pool {
	t.Helper()
	return s.NewDatabase(t, name)
}

// TestLedgerImportExport: a host's ledger goes into a fleet's database with `ledger import`
// (a second import, a DSN holding a password and a broken ledger are refused), the fleet
// appends and its integrator signs with the host's key, and `ledger export` writes a
// directory with the same lines that `ledger audit` accepts against the fleet's checkpoint
// (the export's checkpoint file) and the host's earlier one.
func TestLedgerImportExport(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	pool := createdDB(t, s, "fleet") // import migrates it
	dsn := s.DSN("fleet")
	key := newCheckpointKey(t, "ed25519")
	host := issuedLedger(t, 50)
	hostCheckpoint := checkpointFile(t, host, key.signer, testOrigin, 50)

	code, out, errOut := runCmd("ledger", "import", "--dir", host, "--postgres", dsn, "--postgres-password-file", s.PasswordFile)
	if code != 0 || !strings.Contains(out, "ledger imported: 50 records from 1 segments") {
		t.Fatalf("import: exit %d, %q %q", code, out, errOut)
	}
	code, _, errOut = runCmd("ledger", "import", "--dir", host, "--postgres", dsn, "--postgres-password-file", s.PasswordFile)
	if code != 1 || !strings.Contains(errOut, "not empty") || !strings.Contains(errOut, "a head at record 50") {
		t.Errorf("a second import: exit %d, %q; want a refusal naming what the database holds", code, errOut)
	}
	withPassword := strings.Replace(dsn, pgtest.User+"@", pgtest.User+":"+pgtest.Password+"@", 1)
	if code, _, errOut := runCmd("ledger", "import", "--dir", host, "--postgres", withPassword); code != 2 || !strings.Contains(errOut, "--postgres-password-file") {
		t.Errorf("a DSN holding the password: exit %d, %q", code, errOut)
	}

	// The fleet appends, and its integrator signs the tree with the host's key.
	j := pgstate.NewJournal(pool, pgstate.JournalOptions{})
	for i := 51; i <= 60; i++ {
		if _, err := j.Append(ctx, issuedRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	g := pgstate.NewIntegrator(pool, "test", time.Minute)
	fence, ok, err := g.Acquire(ctx)
	if err != nil || !ok {
		t.Fatalf("Acquire: %t, %v", ok, err)
	}
	tree, err := pgstate.OpenTree(ctx, pool, 0)
	if err != nil {
		t.Fatal(err)
	}
	size, err := pgstate.Integrate(ctx, pool, tree, 1000)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tree.Checkpoint(testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ledgerproof.NewNoteSigner(testOrigin, key.signer)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := ledgerproof.SignCheckpoint(c, signer)
	if err == nil {
		err = g.StoreCheckpoint(ctx, fence, size, signed)
	}
	if err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "export")
	code, out, errOut = runCmd("ledger", "export", "--postgres", dsn, "--postgres-password-file", s.PasswordFile, "--dir", dir)
	if code != 0 || !strings.Contains(out, "ledger exported: 60 records in 1 segments") || !strings.Contains(out, "of size 60") {
		t.Fatalf("export: exit %d, %q %q", code, out, errOut)
	}
	exported := segmentLines(t, dir)
	for i, line := range segmentLines(t, host) {
		if !bytes.Equal(line, exported[i]) {
			t.Fatalf("record %d changed on the way:\n%s\n%s", i+1, line, exported[i])
		}
	}
	code, out, errOut = runCmd("ledger", "audit", "--dir", dir, "--checkpoint", filepath.Join(dir, "checkpoint"), "--checkpoint", hostCheckpoint,
		"--key", key.pubFile, "--origin", testOrigin)
	if code != 0 || !strings.Contains(out, "ledger audit OK: 60 records; 2 checkpoints are prefixes of the ledger") {
		t.Fatalf("audit of the export: exit %d, %q %q", code, out, errOut)
	}
	if code, out, errOut := runCmd("ledger", "show", "--dir", dir, "--uid", "uid-0055"); code != 0 || !strings.Contains(out, "uid-0055") {
		t.Errorf("show --dir on the export (through its index): exit %d, %q %q", code, out, errOut)
	}
	if code, _, errOut := runCmd("ledger", "export", "--postgres", dsn, "--postgres-password-file", s.PasswordFile, "--dir", dir); code != 1 || !strings.Contains(errOut, "not empty") {
		t.Errorf("export into an existing ledger: exit %d, %q", code, errOut)
	}
	wrong := writeTemp(t, "password", []byte("wrong\n"))
	if code, _, errOut := runCmd("ledger", "export", "--postgres", dsn, "--postgres-password-file", wrong, "--dir", t.TempDir()+"/x"); code != 2 || !strings.Contains(errOut, "connecting to the fleet's database") {
		t.Errorf("export with a wrong password: exit %d, %q", code, errOut)
	}

	// A broken host ledger: refused naming the record, nothing stored.
	migratedDB(t, s, "second")
	seg := filepath.Join(host, "ledger-000001.jsonl")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	lines := segmentLines(t, host)
	if err := os.WriteFile(seg, bytes.Replace(data, append(lines[19], '\n'), nil, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCmd("ledger", "import", "--dir", host, "--postgres", s.DSN("second"), "--postgres-password-file", s.PasswordFile)
	if code != 1 || !strings.Contains(errOut, "record 20 missing") || !strings.Contains(errOut, "nothing was stored") {
		t.Errorf("import of a broken ledger: exit %d, %q", code, errOut)
	}
	if _, err := ledger.Verify(host); err == nil {
		t.Fatal("the ledger was not broken")
	}
}

package schema

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/internal/pgtest"
)

// connect opens a pool on a new database of s.
func connect(t testing.TB, s *pgtest.Server, db string) *pgxpool.Pool {
	t.Helper()
	return s.NewDatabase(t, db)
}

// TestMigrateEmptyAndPrevious: this binary's migrations apply on an empty database, and on
// one at the version before the last (every prefix of the migrations, as an older server
// left it); a second Migrate applies nothing; the tables are there.
func TestMigrateEmptyAndPrevious(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	ms, err := Migrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("Migrations() = %d, %v", len(ms), err)
	}
	for prefix := 0; prefix < len(ms); prefix++ {
		pool := connect(t, s, "prefix"+string(rune('a'+prefix)))
		if prefix > 0 {
			if _, err := Migrate(ctx, pool, ms[:prefix]); err != nil {
				t.Fatalf("migrating to version %d: %v", prefix, err)
			}
		}
		applied, err := Migrate(ctx, pool, ms)
		if err != nil || len(applied) != len(ms)-prefix || applied[0] != prefix+1 {
			t.Fatalf("from version %d: applied %v, %v; want %d to %d", prefix, applied, err, prefix+1, len(ms))
		}
		if v, err := Version(ctx, pool); err != nil || v != len(ms) {
			t.Fatalf("Version() = %d, %v; want %d", v, err, len(ms))
		}
		if again, err := Migrate(ctx, pool, ms); err != nil || len(again) != 0 {
			t.Fatalf("a second Migrate applied %v, %v", again, err)
		}
		var seq int64
		if err := pool.QueryRow(ctx, `SELECT seq FROM ledger_head`).Scan(&seq); err != nil || seq != 0 {
			t.Fatalf("ledger_head: %d, %v", seq, err)
		}
	}
}

// testMigrations is a schema of three steps, the second of which fails when fail is set.
func testMigrations(t *testing.T, fail bool) []Migration {
	t.Helper()
	second := "CREATE TABLE b (v int); INSERT INTO b VALUES (1);"
	if fail {
		second = "CREATE TABLE b (v int); INSERT INTO nowhere VALUES (1);"
	}
	ms, err := parseMigrations(fstest.MapFS{
		"m/0001_a.sql": {Data: []byte("CREATE TABLE a (v int);")},
		"m/0002_b.sql": {Data: []byte(second)},
		"m/0003_c.sql": {Data: []byte("CREATE TABLE c (v int);")},
	}, "m")
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestMigrateConcurrentFailedAndTooNew: servers migrating at once apply each step once; a
// step that fails leaves the database at the step before, with nothing of it, and a later
// Migrate goes on from there; an older server refuses a newer schema.
func TestMigrateConcurrentFailedAndTooNew(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	pool := connect(t, s, "concurrent")
	ms := testMigrations(t, false)
	var wg sync.WaitGroup
	results := make([][]int, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() { results[i], errs[i] = Migrate(ctx, pool, ms) })
	}
	wg.Wait()
	total := 0
	for i := range 8 {
		if errs[i] != nil {
			t.Fatalf("server %d: %v", i, errs[i])
		}
		total += len(results[i])
	}
	if total != 3 {
		t.Fatalf("8 servers applied %d steps in all (%v), want 3", total, results)
	}

	failing := connect(t, s, "failing")
	applied, err := Migrate(ctx, failing, testMigrations(t, true))
	if err == nil || !strings.Contains(err.Error(), "0002_b") || len(applied) != 1 {
		t.Fatalf("a failing step: applied %v, %v; want [1] and an error naming 0002_b", applied, err)
	}
	var b bool
	if err := failing.QueryRow(ctx, `SELECT to_regclass('b') IS NOT NULL`).Scan(&b); err != nil || b {
		t.Fatalf("table b after its step failed: %t, %v", b, err)
	}
	if applied, err := Migrate(ctx, failing, ms); err != nil || len(applied) != 2 || applied[0] != 2 {
		t.Fatalf("after the fix: applied %v, %v; want [2 3]", applied, err)
	}
	if _, err := Migrate(ctx, failing, ms[:2]); !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("an older server: %v, want ErrSchemaTooNew naming version 3", err)
	}
}

func TestParseMigrationsRefusesGapsAndNames(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"gap":  {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"name": {"m/0001_a.sql": {}, "m/2_b.sql": {}},
	} {
		if _, err := parseMigrations(fsys, "m"); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestMigrationsCarryTheRecordsTheyFind: a database at version 3 that holds records (one with
// a NUL in a free-text field, which PostgreSQL's jsonb refuses) migrates to the last version,
// and the later migrations' backfills read them: the rotation record's kind and signer, each
// CA's last leaf, the EK binding of each node's latest Bound record (not one an Unbound
// record cleared).
func TestMigrationsCarryTheRecordsTheyFind(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	pool := connect(t, s, "v3")
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Migrate(ctx, pool, ms[:3]); err != nil {
		t.Fatal(err)
	}
	lines := []string{
		`{"seq":1,"decision":"rotated","signer":"example.com/s","client":"admin","grounds":"forced: a\u0000b"}`,
		`{"seq":2,"decision":"issued","signer":"example.com/s","ca":"ab12","notAfter":"2027-01-01T00:00:00Z"}`,
		`{"seq":3,"decision":"issued","signer":"example.com/s","ca":"ab12","notAfter":"2027-03-01T00:00:00Z"}`,
		`{"seq":4,"decision":"bound","signer":"example.com/t","node":"node-a","ek":"ek1"}`,
		`{"seq":5,"decision":"bound","signer":"example.com/t","node":"node-b","ek":"ek2"}`,
		`{"seq":6,"decision":"unbound","signer":"example.com/t","node":"node-b","ek":"ek2"}`,
	}
	for i, l := range lines {
		if _, err := pool.Exec(ctx, `INSERT INTO ledger_records (seq, line, hash, at) VALUES ($1, $2, 'h', now())`, i+1, []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Migrate(ctx, pool, ms); err != nil {
		t.Fatalf("migrating a version 3 database holding records: %v", err)
	}
	var kind, signer string
	if err := pool.QueryRow(ctx, `SELECT kind, signer FROM ledger_records WHERE seq = 1`).Scan(&kind, &signer); err != nil || kind != "rotated" || signer != "example.com/s" {
		t.Errorf("record 1: kind %q, signer %q, %v", kind, signer, err)
	}
	var last time.Time
	if err := pool.QueryRow(ctx, `SELECT not_after FROM ca_leaves WHERE signer = 'example.com/s' AND ca = 'ab12'`).Scan(&last); err != nil ||
		!last.Equal(time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("ca_leaves: %v, %v; want 2027-03-01", last, err)
	}
	var bindings []string
	rows, err := pool.Query(ctx, `SELECT node || '=' || ek FROM attest_bindings ORDER BY node`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var b string
		_ = rows.Scan(&b)
		bindings = append(bindings, b)
	}
	rows.Close()
	if len(bindings) != 1 || bindings[0] != "node-a=ek1" {
		t.Errorf("attest_bindings: %v; want node-a=ek1 alone", bindings)
	}
}

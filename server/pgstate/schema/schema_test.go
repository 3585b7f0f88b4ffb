package schema

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

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

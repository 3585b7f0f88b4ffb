package pgtest_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/signet-pki/signet/internal/pgtest"
)

// psql runs one statement as pgtest.User over TCP and returns its unaligned output.
func psql(t *testing.T, s *pgtest.Server, db, sql string) (string, error) {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	if len(bins) == 0 {
		t.Fatal("no psql")
	}
	cmd := exec.Command(bins[len(bins)-1], "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", pgtest.User, "-d", db, "-Atc", sql)
	cmd.Env = append(cmd.Environ(), "PGPASSWORD="+pgtest.Password)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestServerStartsRestartsAndRecovers: the server answers with the password and refuses a
// wrong one; data committed before a clean stop and before a SIGKILL is there after a start
// on the same port.
func TestServerStartsRestartsAndRecovers(t *testing.T) {
	s := pgtest.Start(t)
	if err := s.CreateDatabase(context.Background(), "signet"); err != nil {
		t.Fatal(err)
	}
	if out, err := psql(t, s, "signet", "CREATE TABLE t (v int); INSERT INTO t VALUES (1);"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	wrong := exec.Command(bins[len(bins)-1], "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", pgtest.User, "-d", "signet", "-Atc", "SELECT 1")
	wrong.Env = append(wrong.Environ(), "PGPASSWORD=not-"+pgtest.Password)
	if out, err := wrong.CombinedOutput(); err == nil || !strings.Contains(string(out), "password authentication failed") {
		t.Fatalf("a wrong password: %v, %s; want password authentication failed", err, out)
	}
	port := s.Port
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := psql(t, s, "signet", "INSERT INTO t VALUES (2);"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	conn, err := pgx.Connect(context.Background(), s.DSN("signet")+"&password="+pgtest.Password)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	// The backend of an open connection died too: nothing answers once Kill returns.
	if _, err := conn.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Fatal("a connection opened before Kill still answers after it: a backend outlived the crash")
	}
	if err := s.Start(); err != nil {
		t.Fatalf("start after SIGKILL: %v", err)
	}
	if s.Port != port {
		t.Fatalf("port %d after restart, want %d", s.Port, port)
	}
	if out, err := psql(t, s, "signet", "SELECT string_agg(v::text, ',' ORDER BY v) FROM t"); err != nil || out != "1,2" {
		t.Fatalf("after a stop and a SIGKILL: %q, %v; want 1,2", out, err)
	}
}

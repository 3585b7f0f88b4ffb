package pgstate

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/internal/pgtest"
)

// connect opens a pool on a new database of s.
func connect(t testing.TB, s *pgtest.Server, db string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	pw, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(s.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Password = strings.TrimSpace(string(pw))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool opens a pool on database db of s as User (a server's, or another server's on the same
// database), closed when the test ends.
func (s *Server) Pool(t testing.TB, db string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(s.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Password = Password
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewDatabase creates database db on s and opens a pool on it (Pool).
func (s *Server) NewDatabase(t testing.TB, db string) *pgxpool.Pool {
	t.Helper()
	if err := s.CreateDatabase(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return s.Pool(t, db)
}

package pgstate

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/internal/pgtest"
)

// connect opens a pool on a new database of s.
func connect(t testing.TB, s *pgtest.Server, db string) *pgxpool.Pool {
	t.Helper()
	return s.NewDatabase(t, db)
}

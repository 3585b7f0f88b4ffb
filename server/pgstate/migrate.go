package pgstate

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/server/pgstate/schema"
)

// The schema lives in its own package (signetctl migrates a database before an import without
// carrying the server); these are its names where the server's state is.
type Migration = schema.Migration

// ErrSchemaTooNew: a newer binary migrated the database (schema.ErrSchemaTooNew).
var ErrSchemaTooNew = schema.ErrSchemaTooNew

// Migrations returns this binary's migrations, in order.
func Migrations() ([]Migration, error) { return schema.Migrations() }

// Migrate applies the migrations the database lacks (schema.Migrate).
func Migrate(ctx context.Context, pool *pgxpool.Pool, ms []Migration) ([]int, error) {
	return schema.Migrate(ctx, pool, ms)
}

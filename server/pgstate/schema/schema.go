// Package schema is the fleet database's schema (issue 43): the versioned SQL migrations this
// binary carries, and Migrate, which applies the missing ones once however many servers (or a
// signetctl ledger import) start together. It imports nothing of the module, so that signetctl
// can prepare a database without carrying the server.
package schema

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var embedded embed.FS

// ErrSchemaTooNew: the database's schema is at a version this binary does not know (a newer
// server migrated it); an older server must not write into it.
var ErrSchemaTooNew = errors.New("the database's schema is newer than this server knows")

// migrationLock is the key of the advisory lock that serializes migrations across servers.
const migrationLock = 0x7369676e65740001 // "signet" ‖ 1

// Migration is one step of the schema.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// Migrations returns this binary's migrations, in order.
func Migrations() ([]Migration, error) { return parseMigrations(embedded, "migrations") }

// parseMigrations reads the NNNN_name.sql files of dir in fsys: versions from 1, without gaps.
func parseMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("reading migrations: %s is not named NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", e.Name(), err)
		}
		v, _ := strconv.Atoi(m[1])
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("reading migrations: version %d follows %d (versions run from 1 without gaps)", m.Version, i)
		}
	}
	return out, nil
}

// Version returns the database's schema version: 0 for a database no server migrated.
func Version(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('signet_schema') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM signet_schema`).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	return v, nil
}

// Migrate applies the migrations the database lacks, in order, each in one transaction with
// its row in signet_schema, under an advisory lock held for that transaction: servers that
// start together apply each migration once, and a failed migration leaves the database at
// the version before it. It returns the versions it applied (none when the database is
// current) and refuses, with ErrSchemaTooNew, a database at a version after the last of ms.
func Migrate(ctx context.Context, pool *pgxpool.Pool, ms []Migration) (applied []int, err error) {
	for {
		done, v, err := migrateOne(ctx, pool, ms)
		if err != nil {
			return applied, err
		}
		if done {
			return applied, nil
		}
		applied = append(applied, v)
	}
}

// migrateOne applies the first migration the database lacks, if any.
func migrateOne(ctx context.Context, pool *pgxpool.Pool, ms []Migration) (done bool, version int, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return fmt.Errorf("taking the migration lock: %w", err)
		}
		// Under the lock: concurrent CREATE TABLE IF NOT EXISTS can fail on PostgreSQL's
		// catalog (a duplicate pg_type row).
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS signet_schema (
			version integer PRIMARY KEY,
			name text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("creating signet_schema: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM signet_schema`).Scan(&current); err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		switch {
		case current > len(ms):
			return fmt.Errorf("%w: it is at version %d, this server knows up to %d; run a server of the newer release", ErrSchemaTooNew, current, len(ms))
		case current == len(ms):
			done = true
			return nil
		}
		m := ms[current]
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("applying migration %04d_%s: %w", m.Version, m.Name, err)
		}
		if fill := backfills[m.Version]; fill != nil {
			if err := fill(ctx, tx); err != nil {
				return fmt.Errorf("applying migration %04d_%s: %w", m.Version, m.Name, err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO signet_schema (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("recording migration %04d_%s: %w", m.Version, m.Name, err)
		}
		version = m.Version
		return nil
	})
	if err != nil {
		return false, 0, fmt.Errorf("migrating the schema: %w", err)
	}
	return done, version, nil
}

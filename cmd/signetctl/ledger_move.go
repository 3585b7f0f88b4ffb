package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/ledgermove"
	"github.com/signet-pki/signet/server/pgstate/schema"
)

// fleetDB holds the flags that reach a fleet's database: --postgres (a DSN without password)
// and --postgres-password-file.
type fleetDB struct {
	dsn, passwordFile string
}

// addFleetDB adds --postgres (required) and --postgres-password-file to cmd.
func addFleetDB(cmd *cobra.Command) *fleetDB {
	db := &fleetDB{}
	cmd.Flags().StringVar(&db.dsn, "postgres", "", "the fleet's database: a `DSN` without password (postgres://signet@db.example:5432/signet?sslmode=verify-full, or key=value pairs), as the servers' state.postgres.dsn")
	cmd.Flags().StringVar(&db.passwordFile, "postgres-password-file", "", "a `file` whose first line is the database password (as state.postgres.passwordFile); without it, the DSN's own means (a client certificate, ~/.pgpass)")
	_ = cmd.MarkFlagRequired("postgres")
	_ = cmd.MarkFlagFilename("postgres-password-file")
	return db
}

// kvPassword finds a password in a key=value DSN.
var kvPassword = regexp.MustCompile(`(^|\s)password\s*=`)

// open connects to the database; errors are input errors (exit 2).
func (db *fleetDB) open(ctx context.Context) (*pgxpool.Pool, error) {
	if hasPassword(db.dsn) {
		return nil, inputError("--postgres holds a password: give it with --postgres-password-file, so that it appears in no command line")
	}
	cfg, err := pgxpool.ParseConfig(db.dsn)
	if err != nil {
		return nil, inputError("--postgres: %v", err)
	}
	if db.passwordFile != "" {
		f, err := os.Open(db.passwordFile)
		if err != nil {
			return nil, inputError("reading --postgres-password-file: %v", err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan()
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, inputError("reading --postgres-password-file: %v", err)
		}
		cfg.ConnConfig.Password = strings.TrimRight(sc.Text(), "\r")
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
		if err != nil {
			pool.Close()
		}
	}
	if err != nil {
		return nil, inputError("connecting to the fleet's database: %v", err)
	}
	return pool, nil
}

// hasPassword reports whether a DSN (URL or key=value) carries a password.
func hasPassword(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return false // ParseConfig says what is wrong
		}
		_, set := u.User.Password()
		return set || u.Query().Has("password")
	}
	return kvPassword.MatchString(dsn)
}

// ledgerExportCommand is "signetctl ledger export": a fleet's ledger into a new ledger
// directory.
func ledgerExportCommand() *cobra.Command {
	var dir string
	var segmentSize int64
	cmd := &cobra.Command{
		Use:   "export --postgres DSN [--postgres-password-file FILE] --dir DIR",
		Short: "Copy a fleet's ledger from its database into a new ledger directory, for offline audit and backup",
		Long: `Copies the ledger of a fleet of signet-servers (state.backend: postgres) into DIR, in the file
ledger's format: every record up to the last one stored when the export begins, each line byte
for byte as the fleet stored it and checked as the next record of the hash chain, in segments
with the index and tree tiles a server builds, and the fleet's latest signed checkpoint as
DIR/checkpoint. Its size and root are checked against the exported records. DIR must not exist
or be empty.

The fleet keeps running: records appended during the export are not in it (export again, or
later, to take them). The directory is what 'signetctl ledger verify', 'audit', 'prove --dir',
'list' and 'show' read:

  signetctl ledger audit --dir DIR --checkpoint DIR/checkpoint --key checkpoint.pub

checks every record and that the fleet's checkpoint, and any older one (a witness's, a single
host's from before it joined the fleet), covers them. The database password comes from
--postgres-password-file, never from the command line.

Prints "ledger exported: …" and exits 0; exits 1 when the export fails (nothing is left in DIR,
except when the fleet's checkpoint does not match its records: then the records are kept, without
the checkpoint, for the investigation); exits 2 when the database cannot be reached.

` + exitCodesHelp,
		Example: `  signetctl ledger export --postgres 'postgres://signet@db.example:5432/signet?sslmode=verify-full' \
      --postgres-password-file /etc/signet/db-password --dir /backup/signet-ledger-$(date +%F)`,
		Args: cobra.NoArgs,
	}
	db := addFleetDB(cmd)
	addLedgerDir(cmd, &dir)
	cmd.Flags().Int64Var(&segmentSize, "segment-size", ledger.DefaultSegmentSize, "the `bytes` past which a segment is closed and the next begun (the servers' ledger.segmentSize)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if segmentSize < 1<<20 {
			return usageError(cmd, "--segment-size must be at least 1048576 (1 MiB)")
		}
		pool, err := db.open(cmd.Context())
		if err != nil {
			return err
		}
		defer pool.Close()
		ex, err := ledgermove.Export(cmd.Context(), pool, dir, ledger.Options{SegmentSize: segmentSize, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return failure("%v", err)
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "ledger exported: %d records in %d segments to %s\n", ex.Records, ex.Segments, ex.Dir)
		if ex.Records > 0 {
			fmt.Fprintf(w, "last hash: %s\n", ex.LastHash)
		}
		if ex.Checkpoint >= 0 {
			fmt.Fprintf(w, "checkpoint: the fleet's latest, of size %d, in %s/checkpoint\n", ex.Checkpoint, ex.Dir)
		} else {
			fmt.Fprintln(w, "checkpoint: none (the fleet has signed none yet)")
		}
		return nil
	}
	return cmd
}

// ledgerImportCommand is "signetctl ledger import": a stopped host's ledger into an empty fleet
// database.
func ledgerImportCommand() *cobra.Command {
	var dir string
	var archives []string
	cmd := &cobra.Command{
		Use:   "import --dir DIR --postgres DSN [--postgres-password-file FILE] [--archive DIR...]",
		Short: "Load a single host's ledger into a new fleet's database (server stopped)",
		Long: `Loads the ledger in DIR, of a signet-server that is stopped (import takes the ledger's lock),
into the database of a new fleet (state.backend: postgres), when the host moves to a fleet.
Every record is checked as 'ledger verify' checks it, and stored with its line byte for byte,
in one transaction: a broken ledger is refused naming the first bad record, and nothing is
stored. The database must hold no ledger: import refuses a database that holds records,
checkpoints of records, tree tiles or answers. It migrates the database to the fleet's schema
first, as a server's start does (a new, empty database is ready for it).

The fleet's integrator builds the Merkle tree of the imported records and signs checkpoints of
it. Configure the fleet with the host's checkpoint key and origin (ledger.checkpoint.key and
.origin), and its checkpoints extend the ones the host signed: keep the host's last
DIR/checkpoint, and audit an export of the fleet against it. Closed segments moved to archive
storage are read from the --archive directories. The database password comes from
--postgres-password-file, never from the command line.

Prints "ledger imported: …" and exits 0; exits 1 when the import is refused or fails (nothing
stored); exits 2 when DIR or the database cannot be read.

` + exitCodesHelp,
		Example: `  systemctl stop signet-server
  signetctl ledger import --dir /var/lib/signet/ledger \
      --postgres 'postgres://signet@db.example:5432/signet?sslmode=verify-full' --postgres-password-file /etc/signet/db-password`,
		Args: cobra.NoArgs,
	}
	addLedgerDir(cmd, &dir)
	db := addFleetDB(cmd)
	addArchives(cmd, &archives)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if _, err := os.Stat(dir); err != nil {
			return inputError("--dir: %v", err)
		}
		pool, err := db.open(cmd.Context())
		if err != nil {
			return err
		}
		defer pool.Close()
		ms, err := schema.Migrations()
		if err != nil {
			return err
		}
		applied, err := schema.Migrate(cmd.Context(), pool, ms)
		if err != nil {
			return failure("preparing the fleet's database: %v", err)
		}
		if len(applied) > 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "database schema migrated: versions %v applied\n", applied)
		}
		im, err := ledgermove.Import(cmd.Context(), pool, dir, archives...)
		switch {
		case errors.Is(err, ledger.ErrLocked):
			return failure("%v: stop signet-server first", err)
		case err != nil:
			return failure("%v", err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "ledger imported: %d records from %d segments of %s; last hash %s\n", im.Records, im.Segments, dir, im.LastHash)
		return nil
	}
	return cmd
}

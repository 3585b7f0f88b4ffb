package ledgertable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/server/ledger/record"
)

// ErrNotEmpty: the database already holds a ledger (records, a checkpoint of records, tiles,
// answers): an import never merges two histories.
var ErrNotEmpty = errors.New("the fleet's database is not empty")

// ErrNoSchema: the database lacks the schema an import writes (pgstate's migrations up to
// MinSchema).
var ErrNoSchema = errors.New("the database does not have the fleet's schema")

// ErrBroken: a line given to Importer.Add is not the next record of the chain.
var ErrBroken = errors.New("the history to import is not an intact chain")

// Import batches: rows are copied once this many are waiting, or this many bytes of lines.
const (
	importRows  = 2048
	importBytes = 8 << 20
)

// Importer loads a history into an empty fleet database, in one transaction: Add checks each
// line as the next record of the chain (canonical, its hash, its seq, its prevHash) and
// copies the records in batches (COPY), filling the columns as the journal does (Row); Commit
// raises ca_leaves to the history's issuances, moves ledger_head to its last record and
// commits. Until then nothing is visible, and a failed import leaves the database as it was.
// The transaction holds the head row from the start, so a server appending meanwhile waits,
// and then appends after the imported history. Tiles and checkpoints are not written: the
// fleet's integrator builds the tree from record 1 when no checkpoint covers records.
type Importer struct {
	schema int
	tx     pgx.Tx
	rows   [][]any
	bytes  int
	seq    uint64
	prev   string
	leaves map[CALeaf]time.Time
	// bindings is each node's latest Bound (its EK) or Unbound ("") record.
	bindings map[string]string
}

// bindingsSchema is the schema version that keeps the EK bindings in attest_bindings
// (migration 5): an import fills it from the Bound and Unbound records, as that migration
// does for the records a database held.
const bindingsSchema = 5

// BeginImport checks that the database has the schema (ErrNoSchema) and holds no ledger
// (ErrNotEmpty, naming what it holds; a checkpoint of size 0, which an integrator signs of
// an empty journal, does not count), and begins the import.
func BeginImport(ctx context.Context, pool *pgxpool.Pool) (*Importer, error) {
	schema, err := checkSchema(ctx, pool)
	if err != nil {
		return nil, err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("importing into the fleet's journal: %w", err)
	}
	im := &Importer{schema: schema, tx: tx, prev: record.ZeroHash, leaves: map[CALeaf]time.Time{}, bindings: map[string]string{}}
	if err := im.checkEmpty(ctx); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("importing into the fleet's journal: %w", err)
	}
	return im, nil
}

// checkSchema checks the schema version pgstate's migrations record in signet_schema.
func checkSchema(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var v int
	var exists bool
	err := pool.QueryRow(ctx, `SELECT to_regclass('signet_schema') IS NOT NULL`).Scan(&exists)
	if err == nil && exists {
		err = pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM signet_schema`).Scan(&v)
	}
	if err != nil {
		return 0, fmt.Errorf("importing into the fleet's journal: reading the schema version: %w", err)
	}
	if v < MinSchema {
		return v, fmt.Errorf("importing into the fleet's journal: %w: it is at version %d, an import needs %d or later (the migrations signet-server applies when it opens the database)",
			ErrNoSchema, v, MinSchema)
	}
	return v, nil
}

// checkEmpty locks the head and checks that nothing of a ledger is stored.
func (im *Importer) checkEmpty(ctx context.Context) error {
	head := Head{}
	var seq int64
	if err := im.tx.QueryRow(ctx, `SELECT seq, hash FROM ledger_head WHERE id FOR UPDATE`).Scan(&seq, &head.Hash); err != nil {
		return fmt.Errorf("locking the journal's head: %w", err)
	}
	var records, checkpoints, tiles, answers, leaves, bindings bool
	if err := im.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ledger_records), EXISTS (SELECT 1 FROM checkpoints WHERE size > 0),
		EXISTS (SELECT 1 FROM tree_tiles), EXISTS (SELECT 1 FROM answers), EXISTS (SELECT 1 FROM ca_leaves)`).
		Scan(&records, &checkpoints, &tiles, &answers, &leaves); err != nil {
		return fmt.Errorf("checking that the database is empty: %w", err)
	}
	if im.schema >= bindingsSchema {
		if err := im.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM attest_bindings)`).Scan(&bindings); err != nil {
			return fmt.Errorf("checking that the database is empty: %w", err)
		}
	}
	var held []string
	for _, h := range []struct {
		ok   bool
		what string
	}{
		{seq > 0, fmt.Sprintf("a head at record %d", seq)}, {records, "ledger records"}, {checkpoints, "checkpoints"},
		{tiles, "tree tiles"}, {answers, "answers"}, {leaves, "CA leaves"}, {bindings, "EK bindings"},
	} {
		if h.ok {
			held = append(held, h.what)
		}
	}
	if len(held) > 0 {
		return fmt.Errorf("%w: it holds %s; import into a new database (no fleet server has appended to)", ErrNotEmpty, strings.Join(held, ", "))
	}
	return nil
}

// Add checks line (a record's line without its newline) as the next record and queues it,
// copying a batch when enough are waiting. A line that does not follow is refused with an
// error wrapping ErrBroken that names the record; the import must then be rolled back.
func (im *Importer) Add(ctx context.Context, line []byte) error {
	r, err := im.check(line)
	if err != nil {
		return fmt.Errorf("importing into the fleet's journal: %w", err)
	}
	im.rows = append(im.rows, Row(r, bytes.Clone(line))) // the caller may reuse line
	im.bytes += len(line)
	if k, t, ok := LeafOf(r); ok && t.After(im.leaves[k]) {
		im.leaves[k] = t
	}
	switch r.Decision {
	case record.Bound:
		im.bindings[r.Node] = r.EK
	case record.Unbound:
		im.bindings[r.Node] = ""
	}
	im.seq, im.prev = r.Seq, r.Hash
	if len(im.rows) >= importRows || im.bytes >= importBytes {
		return im.flush(ctx)
	}
	return nil
}

// check decodes line and checks it is the record after im.seq.
func (im *Importer) check(line []byte) (record.Record, error) {
	return CheckNext(line, im.seq, im.prev)
}

// CheckNext decodes line and checks that it is the record after record seq, whose hash is
// prev: canonical, the next seq, its hash its encoding's, valid, and chained to prev. The
// error wraps ErrBroken and names the record.
func CheckNext(line []byte, seq uint64, prev string) (record.Record, error) {
	want := seq + 1
	r, canonical, err := record.Decode(line)
	switch {
	case err != nil:
		return r, fmt.Errorf("%w: record %d: not a ledger record (%v)", ErrBroken, want, err)
	case !canonical:
		return r, fmt.Errorf("%w: record %d: not in canonical encoding", ErrBroken, want)
	case r.Seq != want:
		return r, fmt.Errorf("%w: record %d: found seq %d", ErrBroken, want, r.Seq)
	}
	if sum, err := r.ComputeHash(); err != nil || sum != r.Hash {
		return r, fmt.Errorf("%w: record %d: hash mismatch — the record was changed", ErrBroken, want)
	}
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("%w: record %d: %v", ErrBroken, want, err)
	}
	if r.PrevHash != prev {
		return r, fmt.Errorf("%w: record %d: chain broken — its prevHash is not the hash of record %d", ErrBroken, want, want-1)
	}
	return r, nil
}

// flush copies the queued rows.
func (im *Importer) flush(ctx context.Context) error {
	if len(im.rows) == 0 {
		return nil
	}
	if _, err := im.tx.CopyFrom(ctx, pgx.Identifier{"ledger_records"}, Columns, pgx.CopyFromRows(im.rows)); err != nil {
		return fmt.Errorf("importing into the fleet's journal: storing records %d-%d: %w", im.rows[0][0], im.seq, err)
	}
	im.rows, im.bytes = im.rows[:0], 0
	return nil
}

// Commit copies what is queued, raises ca_leaves, moves the head to the last record and
// commits. It returns the new head.
func (im *Importer) Commit(ctx context.Context) (Head, error) {
	head := Head{Seq: im.seq, Hash: im.prev}
	err := im.flush(ctx)
	if err == nil && len(im.leaves) > 0 {
		signers, cas, notAfters := LeafArgs(im.leaves)
		if _, err = im.tx.Exec(ctx, RaiseLeavesSQL, signers, cas, notAfters); err != nil {
			err = fmt.Errorf("importing into the fleet's journal: storing the CA leaves: %w", err)
		}
	}
	if err == nil && im.schema >= bindingsSchema {
		err = im.storeBindings(ctx)
	}
	if err == nil {
		if _, err = im.tx.Exec(ctx, `UPDATE ledger_head SET seq = $1, hash = $2 WHERE id`, int64(head.Seq), head.Hash); err != nil {
			err = fmt.Errorf("importing into the fleet's journal: moving its head: %w", err)
		}
	}
	if err == nil {
		if err = im.tx.Commit(ctx); err != nil {
			err = fmt.Errorf("importing into the fleet's journal: committing: %w", err)
		}
	}
	if err != nil {
		im.Rollback(ctx)
		return Head{}, err
	}
	return head, nil
}

// storeBindings stores each node's binding whose latest record is Bound, as migration 5 does
// for the records a database held. (Binding refuses an EK bound to another node, so a history
// binds an EK to one node at a time; were it not so, the first node in order would keep it.)
func (im *Importer) storeBindings(ctx context.Context) error {
	var nodes, eks []string
	for node, ek := range im.bindings {
		if ek != "" {
			nodes, eks = append(nodes, node), append(eks, ek)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	slices.Sort(nodes)
	for i, node := range nodes {
		eks[i] = im.bindings[node]
	}
	if _, err := im.tx.Exec(ctx, `INSERT INTO attest_bindings (node, ek) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING`, nodes, eks); err != nil {
		return fmt.Errorf("importing into the fleet's journal: storing the EK bindings: %w", err)
	}
	return nil
}

// Rollback abandons the import: nothing of it is stored.
func (im *Importer) Rollback(ctx context.Context) {
	_ = im.tx.Rollback(context.WithoutCancel(ctx))
}

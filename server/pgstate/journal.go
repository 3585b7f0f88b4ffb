package pgstate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/server/ledger/record"
	"github.com/signet-pki/signet/server/pgstate/ledgertable"
)

// ErrUnavailable: the journal could not record (the database refused or could not be
// reached); nothing was acknowledged, and the caller fails closed.
var ErrUnavailable = errors.New("the fleet's database is unavailable")

// JournalOptions tune a Journal. The zero value is usable.
type JournalOptions struct {
	// Clock stamps the records (the real clock when nil).
	Clock clock.PassiveClock
	// MaxBatch bounds the records one transaction appends (256 when zero).
	MaxBatch int
	// Timeout bounds one append transaction (10 s when zero).
	Timeout time.Duration
	// Logger is for what the journal does by itself (slog.Default when nil).
	Logger *slog.Logger
	// ReplayUntil gives the replay window of the answer an issued record makes (none when
	// nil): decision.ReplayUntil.
	ReplayUntil func(record.Record) time.Time
}

// Journal is a fleet's ledger in PostgreSQL: every record's line, exactly as the file ledger
// stores it, in ledger_records. Seqs and the hash chain move under the one ledger_head row:
// a batch's transaction locks it (SELECT … FOR UPDATE), seals its records after the head,
// stores them and moves the head, so any number of servers append to one chain that never
// forks. Within a server, concurrent Appends are group-committed: the first to find no batch
// being written writes one with every record waiting, and hands on to the next.
type Journal struct {
	pool *pgxpool.Pool
	opts JournalOptions

	appends group[*appendReq, record.Record]
}

type appendReq struct {
	rec  record.Record
	body record.Body
	groupCall[record.Record]
	claim   *claim // an issuance's claim (Answers), whose answer is stored with the record
	after   uint64 // a Rotated record's compare-and-set (AppendRotation): the last rotation record its server saw
	guarded bool   // after applies
	invalid bool   // answered already: it must not be stored
}

// NewJournal returns the journal of the database pool reaches (migrated by Migrate).
func NewJournal(pool *pgxpool.Pool, opts JournalOptions) *Journal {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	j := &Journal{pool: pool, opts: opts}
	j.appends = group[*appendReq, record.Record]{max: opts.MaxBatch, write: j.commit}
	return j
}

// Append stores r and returns it with Seq, Time, PrevHash and Hash filled, once its
// transaction committed. An issued record appended under a claim of Answers (in ctx) is
// stored only while the claim is still this server's, and its answer with it, in the same
// transaction; otherwise it fails with ErrClaimLost and nothing is stored. An error wrapping ErrUnavailable means it was not acknowledged (if
// the connection failed during the commit, the record may be stored all the same, as a file
// ledger's record may be after a failed fsync); one wrapping record.ErrInvalidRecord, that r
// must not be stored. ctx bounds the wait to join a batch.
func (j *Journal) Append(ctx context.Context, r record.Record) (record.Record, error) {
	return j.append(ctx, r, nil)
}

// AppendRotation appends a Rotated record r only if no other Rotated record of its signer was
// appended after seq after (the last rotation record its server has seen, RotationRecords):
// otherwise it fails with ErrRotationRaced and stores nothing. It is the compare-and-set that
// keeps two servers from each taking a rotation step on the set they saw.
func (j *Journal) AppendRotation(ctx context.Context, r record.Record, after uint64) (record.Record, error) {
	if r.Decision != record.Rotated {
		return record.Record{}, fmt.Errorf("appending to the fleet's journal: %w: AppendRotation takes a rotated record, not %q", record.ErrInvalidRecord, r.Decision)
	}
	return j.append(ctx, r, &after)
}

func (j *Journal) append(ctx context.Context, r record.Record, after *uint64) (record.Record, error) {
	if err := r.Validate(); err != nil {
		return record.Record{}, fmt.Errorf("appending to the fleet's journal: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return record.Record{}, fmt.Errorf("appending to the fleet's journal: %w", err)
	}
	r.Normalize()
	req := &appendReq{rec: r, body: r.EncodeBody()}
	if c, ok := claimOf(ctx); ok && r.Decision == record.Issued {
		req.claim = &c
	}
	if after != nil {
		req.after, req.guarded = *after, true
	}
	rec, err := j.appends.do(ctx, req)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return record.Record{}, fmt.Errorf("appending to the fleet's journal: %w", err)
	}
	return rec, err
}

// commit appends batch in one transaction and answers every request.
func (j *Journal) commit(batch []*appendReq) {
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Timeout)
	defer cancel()
	err := j.commitTx(ctx, batch)
	for _, req := range batch {
		switch {
		case req.invalid:
		case err != nil:
			req.answer(record.Record{}, fmt.Errorf("appending to the fleet's journal: %w: %w", ErrUnavailable, err))
		default:
			req.answer(req.rec, nil)
		}
	}
}

// commitTx appends batch in one transaction of two round trips, so that the head, which every
// server's appends wait for, is held for one round trip: the first begins, locks the head and
// the batch's claims and reads what its rotation records are checked against; the second
// stores the records, moves the head, stores the answers, raises the CAs' last leaves,
// announces the rotation records and commits. A connection left in a transaction (a failure
// between the two) is closed by the pool, never reused, so nothing of a failed batch commits.
func (j *Journal) commitTx(ctx context.Context, batch []*appendReq) error {
	conn, err := j.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Release()
	var seq uint64
	var prev string
	lock := &pgx.Batch{}
	lock.Queue(`BEGIN`)
	lock.Queue(`SELECT seq, hash FROM ledger_head WHERE id FOR UPDATE`).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&seq, &prev); err != nil {
			return fmt.Errorf("locking the journal's head: %w", err)
		}
		return nil
	})
	judge := j.queueChecks(lock, batch)
	if err := conn.SendBatch(ctx, lock).Close(); err != nil {
		rollback(conn)
		return err
	}
	judge()
	now := j.opts.Clock.Now().UTC().Round(0)
	var rows ledgertable.Rows
	for _, req := range batch {
		r := req.rec
		r.Seq, r.Time, r.PrevHash = seq+1, now, prev
		if req.invalid {
			continue
		}
		line, err := r.SealBody(req.body)
		if err != nil {
			req.invalid = true
			req.answer(record.Record{}, fmt.Errorf("appending to the fleet's journal: %w: %w", record.ErrInvalidRecord, err))
			continue
		}
		rows.Add(r, line[:len(line)-1])
		seq, prev = r.Seq, r.Hash
		req.rec = r
	}
	store := &pgx.Batch{}
	if rows.Len() > 0 {
		store.Queue(ledgertable.InsertSQL, rows.Args()...)
		store.Queue(`UPDATE ledger_head SET seq = $1, hash = $2 WHERE id`, int64(seq), prev)
		j.queueAfterRecords(store, batch)
	}
	store.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, store).Close(); err != nil {
		rollback(conn)
		if rows.Len() > 0 {
			return fmt.Errorf("storing records %d-%d: %w", rows.First(), seq, err)
		}
		return err
	}
	return nil
}

// rollback ends a failed transaction, or closes the connection when it cannot, so that the
// pool does not hand it out in the middle of one.
func rollback(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, `ROLLBACK`); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// queueChecks queues, after the head's lock, the locks of the batch's claimed issuances'
// answers rows (in scope order: every transaction takes its locks in that order) and the last
// Rotated record of each guarded rotation's signer. The returned judge, called once the
// queries have run, answers with ErrClaimLost the issuances whose claim is no longer this
// server's, and with ErrRotationRaced the rotations another server's came after.
func (j *Journal) queueChecks(b *pgx.Batch, batch []*appendReq) (judge func()) {
	var scopes []string
	for _, req := range batch {
		if req.claim != nil && !req.invalid {
			scopes = append(scopes, req.claim.scope)
		}
	}
	held := map[string]claim{}
	if len(scopes) > 0 {
		slices.Sort(scopes)
		b.Queue(`SELECT scope, holder, fence, chain IS NOT NULL FROM answers WHERE scope = ANY($1) ORDER BY scope FOR UPDATE`, scopes).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var c claim
					var holder *string
					var answered bool
					if err := rows.Scan(&c.scope, &holder, &c.fence, &answered); err != nil {
						return fmt.Errorf("locking the claims: %w", err)
					}
					if holder != nil && !answered {
						c.holder = *holder
						held[c.scope] = c
					}
				}
				return rows.Err()
			})
	}
	last := map[*appendReq]int64{}
	for _, req := range batch {
		if req.guarded && !req.invalid {
			b.Queue(`SELECT coalesce(max(seq), 0) FROM ledger_records WHERE kind = 'rotated' AND signer = $1`, req.rec.Signer).
				QueryRow(func(row pgx.Row) error {
					var seq int64
					err := row.Scan(&seq)
					last[req] = seq
					return err
				})
		}
	}
	return func() {
		for _, req := range batch {
			switch {
			case req.invalid:
			case req.claim != nil && held[req.claim.scope] != *req.claim:
				req.invalid = true
				req.answer(record.Record{}, fmt.Errorf("appending to the fleet's journal: object %s: %w", req.claim.scope, ErrClaimLost))
			case req.guarded && uint64(last[req]) > req.after:
				req.invalid = true
				req.answer(record.Record{}, fmt.Errorf("appending to the fleet's journal: signer %s (record %d is newer than %d, the last this server saw): %w",
					req.rec.Signer, last[req], req.after, ErrRotationRaced))
			}
		}
	}
}

// queueAfterRecords queues what the batch's records change beside the journal: the answers of
// its claimed issuances (ending their claims), each CA's latest leaf (ca_leaves), and the
// announcement of its rotation records to every server.
func (j *Journal) queueAfterRecords(b *pgx.Batch, batch []*appendReq) {
	leaves := map[ledgertable.CALeaf]time.Time{}
	var announce []string
	for _, req := range batch {
		if req.invalid {
			continue
		}
		r := req.rec
		if k, notAfter, ok := ledgertable.LeafOf(r); ok && notAfter.After(leaves[k]) {
			leaves[k] = notAfter
		}
		if isRotation(r.Decision) && !slices.Contains(announce, r.Signer) {
			announce = append(announce, r.Signer)
		}
		if req.claim == nil {
			continue
		}
		var replay any
		if j.opts.ReplayUntil != nil {
			if t := j.opts.ReplayUntil(r); !t.IsZero() {
				replay = t
			}
		}
		// The fence moves on with the answer: a takeover judged on the claim before it (a
		// server that read the claim as expired while this one was still issuing) no longer
		// matches, reads again, and finds the answer.
		b.Queue(`UPDATE answers SET chain = $3, serial = $4, not_before = $5, not_after = $6, issued_at = $7,
				replay_until = $8, record_seq = $9, holder = NULL, lease_until = NULL, fence = fence + 1
			WHERE scope = $1 AND fence = $2`,
			req.claim.scope, req.claim.fence, []byte(r.Certificate), r.Serial, r.NotBefore, r.NotAfter, r.Time, replay, int64(r.Seq))
	}
	if len(leaves) > 0 {
		signers, cas, notAfters := ledgertable.LeafArgs(leaves)
		b.Queue(ledgertable.RaiseLeavesSQL, signers, cas, notAfters)
	}
	for _, signer := range announce {
		b.Queue(`SELECT pg_notify($1, $2)`, RotationChannel, signer)
	}
}

// Find returns the records about an object UID, or those of a certificate serial (hex,
// compared as a number), oldest first. Give exactly one.
func (j *Journal) Find(objectUID, serial string) ([]record.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), j.opts.Timeout)
	defer cancel()
	var rows pgx.Rows
	var err error
	switch {
	case (objectUID == "") == (serial == ""):
		return nil, errors.New("finding journal records: give exactly one of an object UID and a serial")
	case objectUID != "":
		rows, err = j.pool.Query(ctx, `SELECT line FROM ledger_records WHERE object_uid = $1 ORDER BY seq`, objectUID)
	default:
		var s string
		if s, err = record.NormalizeSerial(serial); err == nil {
			rows, err = j.pool.Query(ctx, `SELECT line FROM ledger_records WHERE serial = $1 ORDER BY seq`, s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("finding journal records: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("finding journal records: %w: %w", ErrUnavailable, err)
	}
	out := make([]record.Record, 0, len(lines))
	for _, line := range lines {
		r, _, err := record.Decode(line)
		if err != nil {
			return nil, fmt.Errorf("finding journal records: a stored line does not decode: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Head returns the seq and hash of the last record (0 and 64 zeros when empty).
func (j *Journal) Head(ctx context.Context) (uint64, string, error) {
	var seq int64
	var hash string
	if err := j.pool.QueryRow(ctx, `SELECT seq, hash FROM ledger_head WHERE id`).Scan(&seq, &hash); err != nil {
		return 0, "", fmt.Errorf("reading the journal's head: %w: %w", ErrUnavailable, err)
	}
	return uint64(seq), hash, nil
}

package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// backfills fill, in the migration's transaction after its SQL, what a version derives from
// the records a database already holds. They read each line with Go's JSON decoder, as the
// ledger does: PostgreSQL's JSON types refuse lines a record may hold (a NUL in a free-text
// field, escaped as \u0000).
var backfills = map[int]func(context.Context, pgx.Tx) error{
	4: backfillRotationAndLeaves,
	5: backfillBindings,
}

// lineFields are the fields of a record line the backfills read.
type lineFields struct {
	Seq      int64     `json:"seq"`
	Decision string    `json:"decision"`
	Signer   string    `json:"signer"`
	CA       string    `json:"ca"`
	NotAfter time.Time `json:"notAfter"`
	Node     string    `json:"node"`
	EK       string    `json:"ek"`
}

// eachRecord calls fn with the fields of every stored record, in seq order.
func eachRecord(ctx context.Context, tx pgx.Tx, fn func(lineFields)) error {
	rows, err := tx.Query(ctx, `SELECT seq, line FROM ledger_records ORDER BY seq`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var line []byte
		if err := rows.Scan(&seq, &line); err != nil {
			return err
		}
		var f lineFields
		if err := json.Unmarshal(line, &f); err != nil {
			return fmt.Errorf("record %d does not decode: %w", seq, err)
		}
		f.Seq = seq
		fn(f)
	}
	return rows.Err()
}

// backfillRotationAndLeaves gives the rotation records their kind and signer, and raises
// ca_leaves to the NotAfter of every issued record (version 4).
func backfillRotationAndLeaves(ctx context.Context, tx pgx.Tx) error {
	var seqs []int64
	var kinds, signers []string
	type leaf struct{ signer, ca string }
	leaves := map[leaf]time.Time{}
	err := eachRecord(ctx, tx, func(f lineFields) {
		switch f.Decision {
		case "rotated", "published":
			seqs, kinds, signers = append(seqs, f.Seq), append(kinds, f.Decision), append(signers, f.Signer)
		case "issued":
			if k := (leaf{f.Signer, f.CA}); !f.NotAfter.IsZero() && f.NotAfter.After(leaves[k]) {
				leaves[k] = f.NotAfter
			}
		}
	})
	if err != nil {
		return fmt.Errorf("reading the records: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE ledger_records r SET kind = u.kind, signer = u.signer
		FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(seq, kind, signer) WHERE r.seq = u.seq`, seqs, kinds, signers); err != nil {
		return fmt.Errorf("marking the rotation records: %w", err)
	}
	var ls, cas []string
	var notAfters []time.Time
	for k, t := range leaves {
		ls, cas, notAfters = append(ls, k.signer), append(cas, k.ca), append(notAfters, t)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ca_leaves (signer, ca, not_after)
		SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[])`, ls, cas, notAfters); err != nil {
		return fmt.Errorf("storing the CAs' last leaves: %w", err)
	}
	return nil
}

// backfillBindings binds each node to the EK of its latest Bound record, unless an Unbound
// record came after it (version 5).
func backfillBindings(ctx context.Context, tx pgx.Tx) error {
	bound := map[string]string{} // node → EK; "" once unbound
	err := eachRecord(ctx, tx, func(f lineFields) {
		switch f.Decision {
		case "bound":
			bound[f.Node] = f.EK
		case "unbound":
			bound[f.Node] = ""
		}
	})
	if err != nil {
		return fmt.Errorf("reading the records: %w", err)
	}
	var nodes, eks []string
	for node, ek := range bound {
		if ek != "" {
			nodes, eks = append(nodes, node), append(eks, ek)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO attest_bindings (node, ek) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING`,
		nodes, eks); err != nil {
		return fmt.Errorf("storing the EK bindings: %w", err)
	}
	return nil
}

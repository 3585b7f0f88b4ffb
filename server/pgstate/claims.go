package pgstate

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// maxClaimBatch bounds the new claims one transaction inserts.
const maxClaimBatch = 256

// claimBatcher inserts the new claims of concurrent calls in one transaction, by the group
// commit the journal's appends use: a claim is one row of a multi-row INSERT … ON CONFLICT DO
// NOTHING, so PostgreSQL runs one transaction for many issuances instead of one each (the
// fleet bench found the claims' transactions to be most of the database's work per issuance).
type claimBatcher struct {
	a     *Answers
	group group[*claimReq, int64]
}

type claimReq struct {
	scope string
	hash  []byte
	groupCall[int64]
}

// claim inserts scope's claim and returns its fence, or 0 when the scope already had a row
// (or an earlier call of the same batch took it).
func (c *claimBatcher) claim(ctx context.Context, scope string, hash []byte) (int64, error) {
	return c.group.do(ctx, &claimReq{scope: scope, hash: hash})
}

// insert claims batch's scopes in one transaction that commits without waiting for its own
// log flush (synchronous_commit off): a claim lost in a database crash is safe, since the
// journal stores an issuance only under its claim, checked under a row lock in a durable
// commit. Of several calls for one scope in the batch, the first gets the claim.
func (c *claimBatcher) insert(batch []*claimReq) {
	ctx, cancel := context.WithTimeout(context.Background(), c.a.opts.Timeout)
	defer cancel()
	first := map[string]*claimReq{}
	var scopes []string
	var hashes [][]byte
	for _, r := range batch {
		if _, seen := first[r.scope]; !seen {
			first[r.scope] = r
			scopes, hashes = append(scopes, r.scope), append(hashes, r.hash)
		}
	}
	fences := map[string]int64{}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL synchronous_commit TO OFF`)
	b.Queue(`INSERT INTO answers (scope, request_hash, holder, fence, lease_until)
		SELECT s, h, $3, 1, now() + make_interval(secs => $4) FROM unnest($1::text[], $2::bytea[]) AS u(s, h)
		ON CONFLICT (scope) DO NOTHING RETURNING scope, fence`, scopes, hashes, c.a.holder, c.a.opts.Lease.Seconds()).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var scope string
				var fence int64
				if err := rows.Scan(&scope, &fence); err != nil {
					return err
				}
				fences[scope] = fence
			}
			return rows.Err()
		})
	b.Queue(`COMMIT`)
	err := c.a.pool.SendBatch(ctx, b).Close()
	for _, r := range batch {
		switch {
		case err != nil:
			r.answer(0, err)
		case first[r.scope] == r:
			r.answer(fences[r.scope], nil)
		default:
			r.answer(0, nil)
		}
	}
}

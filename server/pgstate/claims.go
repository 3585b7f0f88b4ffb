package pgstate

import (
	"context"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
)

// maxClaimBatch bounds the new claims one transaction inserts.
const maxClaimBatch = 256

// claimBatcher inserts the new claims of concurrent calls in one transaction, as the journal
// batches records: the first call to find no batch being written writes one with every claim
// waiting, and hands on to the next. A claim is one row of a multi-row INSERT … ON CONFLICT DO
// NOTHING, so PostgreSQL runs one transaction for many issuances instead of one each (the
// fleet bench found the claims' transactions to be most of the database's work per issuance).
type claimBatcher struct {
	a       *Answers
	mu      sync.Mutex
	pending []*claimReq
	writing bool
}

type claimReq struct {
	scope string
	hash  []byte
	done  chan claimRes
}

type claimRes struct {
	fence int64 // 0: not claimed (the scope had a row, or an earlier call of the batch took it)
	err   error
	lead  bool
}

// claim inserts scope's claim and returns its fence, or 0 when the scope already had a row.
func (c *claimBatcher) claim(ctx context.Context, scope string, hash []byte) (int64, error) {
	req := &claimReq{scope: scope, hash: hash, done: make(chan claimRes, 1)}
	c.mu.Lock()
	c.pending = append(c.pending, req)
	lead := !c.writing
	c.writing = true
	c.mu.Unlock()
	if !lead {
		// A batch taken is written within its timeout; the caller's own deadline bounds the
		// claim's later steps.
		res := <-req.done
		if !res.lead {
			return res.fence, res.err
		}
	}
	c.write(ctx)
	res := <-req.done
	return res.fence, res.err
}

// write inserts the claims waiting (up to maxClaimBatch) and passes the lead on.
func (c *claimBatcher) write(ctx context.Context) {
	c.mu.Lock()
	n := min(len(c.pending), maxClaimBatch)
	batch := slices.Clone(c.pending[:n])
	c.pending = slices.Delete(c.pending, 0, n)
	c.mu.Unlock()
	c.insert(context.WithoutCancel(ctx), batch)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		c.writing = false
		return
	}
	c.pending[0].done <- claimRes{lead: true}
}

// insert claims batch's scopes in one transaction that commits without waiting for its own
// log flush (synchronous_commit off): a claim lost in a database crash is safe, since the
// journal stores an issuance only under its claim, checked under a row lock in a durable
// commit. Of several calls for one scope in the batch, the first gets the claim.
func (c *claimBatcher) insert(ctx context.Context, batch []*claimReq) {
	ctx, cancel := context.WithTimeout(ctx, c.a.opts.Timeout)
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
			r.done <- claimRes{err: err}
		case first[r.scope] == r:
			r.done <- claimRes{fence: fences[r.scope]}
		default:
			r.done <- claimRes{}
		}
	}
}

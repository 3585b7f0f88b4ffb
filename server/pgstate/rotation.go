package pgstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/server/ledger/record"
)

// RotationChannel is the LISTEN/NOTIFY channel on which the journal announces, at the commit
// of its transaction, each signer a rotation record (Rotated or Published) was appended for.
const RotationChannel = "signet_rotation"

// ErrRotationRaced: another server changed the signer's CA set after the records this server
// had seen; nothing was stored, and the step is to be taken again on the set as it is now.
var ErrRotationRaced = errors.New("another server changed the signer's CA set meanwhile")

func isRotation(d record.Decision) bool { return d == record.Rotated || d == record.Published }

// RotationRecords returns the Rotated and Published records appended after seq after, oldest
// first: what a server that has followed the rotation up to after has not seen.
func (j *Journal) RotationRecords(ctx context.Context, after uint64) ([]record.Record, error) {
	rows, err := j.pool.Query(ctx, `SELECT line FROM ledger_records WHERE kind IS NOT NULL AND seq > $1 ORDER BY seq`, int64(after))
	if err != nil {
		return nil, fmt.Errorf("reading the rotation records: %w: %w", ErrUnavailable, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("reading the rotation records: %w: %w", ErrUnavailable, err)
	}
	out := make([]record.Record, 0, len(lines))
	for _, line := range lines {
		r, _, err := record.Decode(line)
		if err != nil {
			return nil, fmt.Errorf("reading the rotation records: a stored line does not decode: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// LastLeaves returns, per signer and CA fingerprint ("" for records that name none), the
// latest NotAfter of a leaf the fleet issued.
func (j *Journal) LastLeaves(ctx context.Context) (map[string]map[string]time.Time, error) {
	rows, err := j.pool.Query(ctx, `SELECT signer, ca, not_after FROM ca_leaves`)
	if err != nil {
		return nil, fmt.Errorf("reading the CAs' last leaves: %w: %w", ErrUnavailable, err)
	}
	defer rows.Close()
	out := map[string]map[string]time.Time{}
	for rows.Next() {
		var signer, ca string
		var t time.Time
		if err := rows.Scan(&signer, &ca, &t); err != nil {
			return nil, fmt.Errorf("reading the CAs' last leaves: %w", err)
		}
		if out[signer] == nil {
			out[signer] = map[string]time.Time{}
		}
		out[signer][ca] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the CAs' last leaves: %w: %w", ErrUnavailable, err)
	}
	return out, nil
}

// Listen calls changed with the payload of every notification on channel, until ctx ends. It
// listens on a connection of its own; each time it begins listening (at first, and after
// losing the connection, as when the database restarts) it calls changed with "": what was
// announced meanwhile is lost, so look again at everything. It returns ctx's error; a lost
// connection is reported to lost (if set) and retried every second.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, changed func(payload string), lost func(error)) error {
	for {
		err := listen(ctx, pool, channel, changed)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if lost != nil {
			lost(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func listen(ctx context.Context, pool *pgxpool.Pool, channel string, changed func(string)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		conn.Conn().Close(ctx) //nolint:errcheck // a broken connection is not returned to the pool
		return err
	}
	changed("")
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			// The connection is closed rather than returned listening: a pooled connection
			// must not keep a LISTEN for its next user.
			conn.Conn().Close(context.Background()) //nolint:errcheck // closing is all that is left to do
			return err
		}
		changed(n.Payload)
	}
}

package pgstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/server/ledger/record"
)

// ErrVersion: a CA set changed since the version a swap expected (another server changed it
// first); reload it and decide again.
var ErrVersion = errors.New("the CA set changed meanwhile")

// caSetsChannel is the LISTEN/NOTIFY channel of CA set changes; the payload is the signer.
const caSetsChannel = "signet_ca_sets"

// CASets is the fleet's CA set of each signer in the ca_sets table: loaded by any server,
// swapped by compare-and-set on its version, each change announced to every server.
type CASets struct {
	pool *pgxpool.Pool
}

// NewCASets returns the CA sets of the database pool reaches.
func NewCASets(pool *pgxpool.Pool) *CASets { return &CASets{pool: pool} }

// CASet is one signer's CA set at a version.
type CASet struct {
	Signer    string
	Version   int64
	Authority record.Authority
}

// Load returns every signer's CA set.
func (s *CASets) Load(ctx context.Context) (map[string]CASet, error) {
	rows, err := s.pool.Query(ctx, `SELECT signer, version, authority FROM ca_sets`)
	if err != nil {
		return nil, fmt.Errorf("loading the CA sets: %w: %w", ErrUnavailable, err)
	}
	out := map[string]CASet{}
	for rows.Next() {
		var c CASet
		var raw []byte
		if err := rows.Scan(&c.Signer, &c.Version, &raw); err != nil {
			rows.Close()
			return nil, fmt.Errorf("loading the CA sets: %w", err)
		}
		if err := json.Unmarshal(raw, &c.Authority); err != nil {
			rows.Close()
			return nil, fmt.Errorf("loading the CA set of %s: %w", c.Signer, err)
		}
		out[c.Signer] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("loading the CA sets: %w: %w", ErrUnavailable, err)
	}
	return out, nil
}

// Swap replaces signer's CA set by a, if its version is still expect (0: the signer has none
// yet), and returns the new version; otherwise it fails with ErrVersion. The change is
// announced to every server in the same transaction (NOTIFY is sent at commit).
func (s *CASets) Swap(ctx context.Context, signer string, expect int64, a record.Authority) (int64, error) {
	raw, err := json.Marshal(a)
	if err != nil {
		return 0, fmt.Errorf("swapping the CA set of %s: %w", signer, err)
	}
	var version int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if expect == 0 {
			err = tx.QueryRow(ctx, `INSERT INTO ca_sets (signer, version, authority) VALUES ($1, 1, $2)
				ON CONFLICT (signer) DO NOTHING RETURNING version`, signer, raw).Scan(&version)
		} else {
			err = tx.QueryRow(ctx, `UPDATE ca_sets SET version = version + 1, authority = $3, changed_at = now()
				WHERE signer = $1 AND version = $2 RETURNING version`, signer, expect, raw).Scan(&version)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w (expected version %d)", ErrVersion, expect)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, caSetsChannel, signer)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("swapping the CA set of %s: %w", signer, err)
	}
	return version, nil
}

// Watch calls changed with the signer of every CA set change any server makes, until ctx
// ends. It listens on a connection of its own; each time it begins listening (at first, and
// after losing the connection, as when the database restarts) it calls changed with "":
// reload every set, as changes may have been made before. It returns ctx's error; failed
// connections are retried every second, and reported to lost.
func (s *CASets) Watch(ctx context.Context, changed func(signer string), lost func(error)) error {
	for {
		err := s.listen(ctx, changed)
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

func (s *CASets) listen(ctx context.Context, changed func(string)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+caSetsChannel); err != nil {
		conn.Conn().Close(ctx) //nolint:errcheck // a broken connection is not returned to the pool
		return err
	}
	changed("")
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			_, _ = conn.Exec(context.Background(), "UNLISTEN "+caSetsChannel)
			return err
		}
		changed(n.Payload)
	}
}

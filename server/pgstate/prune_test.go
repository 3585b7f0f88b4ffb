package pgstate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/pgtest"
)

// TestPruneKeepsWhatIsNeeded: answers past the retention go (an old issuance, a claim whose
// lease ran out long ago), recent ones and every record stay; of the checkpoints the latest
// KeepCheckpoints stay.
func TestPruneKeepsWhatIsNeeded(t *testing.T) {
	s := pgtest.Start(t)
	pool := migrated(t, s, "prune")
	ctx := context.Background()
	j := NewJournal(pool, JournalOptions{})
	old, err := j.Append(ctx, issued(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	recent, err := j.Append(ctx, issued(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, row := range []struct {
		scope string
		at    time.Time
		seq   any
		claim bool
	}{
		{"old-answer", now.Add(-48 * time.Hour), int64(old.Seq), false},
		{"recent-answer", now.Add(-time.Hour), int64(recent.Seq), false},
		{"old-claim", now.Add(-48 * time.Hour), nil, true},
		{"live-claim", now.Add(time.Minute), nil, true},
	} {
		var q string
		if row.claim {
			q = `INSERT INTO answers (scope, request_hash, holder, lease_until) VALUES ($1, 'h', 'x', $2)`
			_, err = pool.Exec(ctx, q, row.scope, row.at)
		} else {
			q = `INSERT INTO answers (scope, request_hash, chain, issued_at, record_seq) VALUES ($1, 'h', 'c', $2, $3)`
			_, err = pool.Exec(ctx, q, row.scope, row.at, row.seq)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for size := range KeepCheckpoints + 10 {
		if _, err := pool.Exec(ctx, `INSERT INTO checkpoints (size, signed, fence) VALUES ($1, $2, 1)`, size, []byte(fmt.Sprint(size))); err != nil {
			t.Fatal(err)
		}
	}
	answers, checkpoints, err := Prune(ctx, pool, now.Add(-24*time.Hour))
	if err != nil || answers != 2 || checkpoints != 10 {
		t.Fatalf("Prune = %d answers, %d checkpoints, %v; want 2 and 10", answers, checkpoints, err)
	}
	var left []string
	rows, _ := pool.Query(ctx, `SELECT scope FROM answers ORDER BY scope`)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		left = append(left, s)
	}
	rows.Close()
	if fmt.Sprint(left) != "[live-claim recent-answer]" {
		t.Fatalf("answers left: %v", left)
	}
	var n, lowest int64
	if err := pool.QueryRow(ctx, `SELECT count(*), min(size) FROM checkpoints`).Scan(&n, &lowest); err != nil || n != KeepCheckpoints || lowest != 10 {
		t.Fatalf("checkpoints left: %d from size %d, %v", n, lowest, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM ledger_records`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("records left: %d, %v", n, err)
	}
}

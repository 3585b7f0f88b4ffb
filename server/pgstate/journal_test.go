package pgstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/server/ledger/record"
)

// migrated opens a pool on a new, migrated database of s.
func migrated(t testing.TB, s *pgtest.Server, db string) *pgxpool.Pool {
	t.Helper()
	pool := connect(t, s, db)
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Migrate(context.Background(), pool, ms); err != nil {
		t.Fatal(err)
	}
	return pool
}

// secondPool is another server's pool on the same database.
func secondPool(t testing.TB, s *pgtest.Server, db string) *pgxpool.Pool {
	t.Helper()
	return s.Pool(t, db)
}

func issued(server, i int) record.Record {
	return record.Record{
		Decision: record.Issued, Signer: "example.com/signer", Client: fmt.Sprintf("spiffe://signet/watcher-%d", server),
		ObjectUID: fmt.Sprintf("uid-%d-%04d", server, i), Serial: fmt.Sprintf("0x%x", server<<20|i), Message: "issued <&>",
		Certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
	}
}

// checkChain reads every stored record and checks it as an auditor would: seqs 1…n without a
// gap, each line canonical, its hash its encoding's, its prevHash the record before's.
func checkChain(t *testing.T, pool *pgxpool.Pool) map[uint64]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT seq, line FROM ledger_records ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	lines := map[uint64]string{}
	prev := record.ZeroHash
	want := uint64(1)
	for rows.Next() {
		var seq int64
		var line []byte
		if err := rows.Scan(&seq, &line); err != nil {
			t.Fatal(err)
		}
		r, canonical, err := record.Decode(line)
		if err != nil || !canonical || r.Seq != uint64(seq) || uint64(seq) != want {
			t.Fatalf("record at seq %d (want %d): seq %d, canonical %t, %v", seq, want, r.Seq, canonical, err)
		}
		if h, err := r.ComputeHash(); err != nil || h != r.Hash || r.PrevHash != prev {
			t.Fatalf("record %d: hash %s (computed %s, %v), prevHash %s, want %s: the chain forks or breaks", seq, r.Hash, h, err, r.PrevHash, prev)
		}
		prev, want = r.Hash, want+1
		lines[r.Seq] = string(line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var head int64
	var hash string
	if err := pool.QueryRow(context.Background(), `SELECT seq, hash FROM ledger_head`).Scan(&head, &hash); err != nil || uint64(head) != want-1 || hash != prev {
		t.Fatalf("head %d %s, %v; want %d %s", head, hash, err, want-1, prev)
	}
	return lines
}

// TestJournalTwoServersOneChain: two servers (two pools, each its own Journal) append from 32
// goroutines each at once; every record is acknowledged once, the stored records form one
// chain with consecutive seqs, and each acknowledged record is the one stored at its seq.
func TestJournalTwoServersOneChain(t *testing.T) {
	s := pgtest.Start(t)
	pools := []*pgxpool.Pool{migrated(t, s, "fleet"), secondPool(t, s, "fleet")}
	const callers, each = 32, 20
	var mu sync.Mutex
	acked := map[uint64]record.Record{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*callers)
	for server, pool := range pools {
		j := NewJournal(pool, JournalOptions{MaxBatch: 16})
		for c := range callers {
			wg.Go(func() {
				for i := range each {
					r, err := j.Append(context.Background(), issued(server, c*each+i))
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					if _, dup := acked[r.Seq]; dup {
						errs <- fmt.Errorf("seq %d acknowledged twice", r.Seq)
					}
					acked[r.Seq] = r
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	lines := checkChain(t, pools[0])
	if len(lines) != 2*callers*each || len(acked) != len(lines) {
		t.Fatalf("%d records stored, %d acknowledged; want %d", len(lines), len(acked), 2*callers*each)
	}
	for seq, r := range acked {
		if !strings.Contains(lines[seq], `"hash":"`+r.Hash+`"`) || !strings.Contains(lines[seq], `"objectUID":"`+r.ObjectUID+`"`) {
			t.Fatalf("acknowledged record %d (%s) is not the one stored: %s", seq, r.ObjectUID, lines[seq])
		}
	}
}

// TestJournalFind: by object UID and by serial, written any way (case, 0x, leading zeros).
func TestJournalFind(t *testing.T) {
	s := pgtest.Start(t)
	j := NewJournal(migrated(t, s, "find"), JournalOptions{})
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		if _, err := j.Append(ctx, issued(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	refusal := record.Record{Decision: record.Refused, Signer: "example.com/signer", ObjectUID: issued(1, 3).ObjectUID, Reason: "POLICY_VIOLATION", Message: "no"}
	if _, err := j.Append(ctx, refusal); err != nil {
		t.Fatal(err)
	}
	got, err := j.Find(issued(1, 3).ObjectUID, "")
	if err != nil || len(got) != 2 || got[0].Seq != 3 || got[1].Decision != record.Refused {
		t.Fatalf("Find(uid of 3) = %+v, %v", got, err)
	}
	for _, q := range []string{"0x100003", "100003", "0X0100003", "00100003"} {
		if got, err := j.Find("", q); err != nil || len(got) != 1 || got[0].Seq != 3 {
			t.Fatalf("Find(serial %q) = %+v, %v", q, got, err)
		}
	}
	if got, err := j.Find("", "ff"); err != nil || len(got) != 0 {
		t.Fatalf("Find(an unknown serial) = %+v, %v", got, err)
	}
	if _, err := j.Find("", ""); err == nil {
		t.Fatal("Find with neither: no error")
	}
	if _, err := j.Append(ctx, record.Record{Decision: record.Issued, Signer: "s"}); !errors.Is(err, record.ErrInvalidRecord) {
		t.Fatalf("an issued record without its certificate: %v, want ErrInvalidRecord", err)
	}
}

// TestJournalFailsClosedAndResumes: with the database down, Append fails with ErrUnavailable
// (nothing acknowledged); once it is back, appends continue the same chain.
func TestJournalFailsClosedAndResumes(t *testing.T) {
	s := pgtest.Start(t)
	j := NewJournal(migrated(t, s, "down"), JournalOptions{Timeout: 3 * time.Second})
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		if _, err := j.Append(ctx, issued(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if r, err := j.Append(ctx, issued(1, 4)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Append with the database down = seq %d, %v; want ErrUnavailable", r.Seq, err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	var r record.Record
	var err error
	for range 50 { // the pool's connections were cut: the first attempts may meet dead ones
		if r, err = j.Append(ctx, issued(1, 5)); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || r.Seq != 4 {
		t.Fatalf("Append after the database came back = seq %d, %v; want seq 4", r.Seq, err)
	}
	checkChain(t, j.pool)
}

package ledgertable_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/server/ledger/record"
	"github.com/signet-pki/signet/server/pgstate"
	"github.com/signet-pki/signet/server/pgstate/ledgertable"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// open connects to database db of s, creating it, and migrates it when migrate is set.
func open(t *testing.T, s *pgtest.Server, db string, migrate bool) *pgxpool.Pool {
	t.Helper()
	pool := s.NewDatabase(t, db)
	if migrate {
		ms, err := pgstate.Migrations()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pgstate.Migrate(context.Background(), pool, ms); err != nil {
			t.Fatal(err)
		}
	}
	return pool
}

// varied returns record i of a history that has every kind of row: issuances (serials written
// any way, with and without a CA), refusals, rotations and publications.
func varied(i int) record.Record {
	signer := fmt.Sprintf("example.com/signer-%d", i%3)
	switch i % 7 {
	case 3:
		return record.Record{Decision: record.Refused, Signer: signer, ObjectUID: fmt.Sprintf("uid-%05d", i), Reason: "POLICY_VIOLATION", Message: "no <&>"}
	case 5:
		return record.Record{Decision: record.Rotated, Signer: signer, Client: "configuration", Message: "staged",
			Authority: &record.Authority{CAs: []record.AuthorityCA{{Fingerprint: strings.Repeat("ab", 32), State: "active", By: "configuration"}}}}
	case 6:
		return record.Record{Decision: record.Published, Signer: signer, Cluster: "prod", BundleHash: strings.Repeat("cd", 32)}
	}
	r := record.Record{
		Decision: record.Issued, Signer: signer, ObjectUID: fmt.Sprintf("uid-%05d", i), Serial: fmt.Sprintf("0x00%X", i+1),
		NotBefore: t0, NotAfter: t0.Add(time.Duration(i%11) * time.Hour), Message: "issued",
		Certificate: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
	}
	if i%2 == 0 {
		r.CA = fmt.Sprintf("%064x", i%4)
	}
	if i%13 == 0 {
		r.Serial, r.ObjectUID = "not-hex", "" // stored with NULL serial and UID
	}
	return r
}

// sealed returns the lines (without newline) of records first…first+n-1 of varied, chained
// after prev.
func sealed(t *testing.T, first, n int, prev string) [][]byte {
	t.Helper()
	out := make([][]byte, 0, n)
	for i := first; i < first+n; i++ {
		r := varied(i)
		r.Seq, r.Time, r.PrevHash = uint64(i), t0.Add(time.Duration(i)*time.Millisecond), prev
		r.Normalize()
		line, err := r.Seal()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.TrimSuffix(line, []byte("\n")))
		prev = r.Hash
	}
	return out
}

// load imports lines into pool.
func load(t *testing.T, pool *pgxpool.Pool, lines [][]byte) ledgertable.Head {
	t.Helper()
	ctx := context.Background()
	im, err := ledgertable.BeginImport(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range lines {
		if err := im.Add(ctx, line); err != nil {
			t.Fatal(err)
		}
	}
	head, err := im.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return head
}

// dump returns every row of ledger_records (as text), of ca_leaves and the head.
func dump(t *testing.T, pool *pgxpool.Pool) (records, leaves []string, head ledgertable.Head) {
	t.Helper()
	ctx := context.Background()
	for q, out := range map[string]*[]string{
		`SELECT format('%s|%s|%s|%s|%s|%s|%s|%s', seq, encode(line, 'escape'), hash, at, serial, object_uid, kind, signer) FROM ledger_records ORDER BY seq`: &records,
		`SELECT format('%s|%s|%s', signer, ca, not_after) FROM ca_leaves ORDER BY signer, ca`:                                                                &leaves,
	} {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			*out = append(*out, s)
		}
		rows.Close()
	}
	head, err := ledgertable.ReadHead(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	return records, leaves, head
}

// TestImportIsWhatTheJournalStores: a history appended by the fleet's journal (pgstate), then
// exported and imported into a second database, gives the same rows, column for column (the
// normalized serial, the UID, kind and signer, NULLs alike), the same ca_leaves and the same
// head: Row and the journal follow one rule. Exporting the second gives the same lines.
func TestImportIsWhatTheJournalStores(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	a, b := open(t, s, "journal", true), open(t, s, "imported", true)
	j := pgstate.NewJournal(a, pgstate.JournalOptions{})
	for i := 1; i <= 300; i++ {
		if _, err := j.Append(ctx, varied(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range [][3]string{{"bound", "node-a", "ek-1"}, {"bound", "node-b", "ek-2"}, {"unbound", "node-a", "ek-1"}, {"bound", "node-c", "ek-1"}} {
		r := record.Record{Decision: record.Decision(b[0]), Signer: "example.com/tpm", Client: "admin", Node: b[1], EK: b[2], Message: b[0]}
		if _, err := j.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var lines [][]byte
	head, err := ledgertable.Export(ctx, a, func(seq uint64, line []byte) error {
		if seq != uint64(len(lines)+1) {
			return fmt.Errorf("seq %d after %d", seq, len(lines))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil || head.Seq != 304 || len(lines) != 304 {
		t.Fatalf("Export: head %+v, %d lines, %v", head, len(lines), err)
	}
	if got := load(t, b, lines); got != head {
		t.Fatalf("import's head %+v, the journal's %+v", got, head)
	}
	recA, leavesA, headA := dump(t, a)
	recB, leavesB, headB := dump(t, b)
	if headA != headB || len(leavesA) == 0 || !reflect.DeepEqual(leavesA, leavesB) {
		t.Fatalf("heads %+v, %+v; ca_leaves\n%q\n%q", headA, headB, leavesA, leavesB)
	}
	if len(recA) != 304 || !reflect.DeepEqual(recA, recB) {
		for i := range min(len(recA), len(recB)) {
			if recA[i] != recB[i] {
				t.Fatalf("row %d differs:\njournal %s\nimport  %s", i+1, recA[i], recB[i])
			}
		}
		t.Fatalf("%d rows from the journal, %d imported", len(recA), len(recB))
	}
	kinds := strings.Join(recA, "\n")
	for _, want := range []string{"|rotated|example.com/signer-", "|published|example.com/signer-"} {
		if !strings.Contains(kinds, want) {
			t.Errorf("no row has %q: the history lacks a kind of row", want)
		}
	}
	if !strings.HasSuffix(recA[7], "|9|uid-00008||") || !strings.HasSuffix(recA[38], "||||") {
		t.Errorf("record 8 (serial 0x009) and 39 (no hex serial, no UID) are stored as\n%s\n%s", recA[7], recA[38])
	}
	var bindings []string
	rows, err := b.Query(ctx, `SELECT node || '=' || ek FROM attest_bindings ORDER BY node`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		bindings = append(bindings, s)
	}
	rows.Close()
	if want := []string{"node-b=ek-2", "node-c=ek-1"}; !reflect.DeepEqual(bindings, want) {
		t.Errorf("EK bindings after the import: %q, want %q (each node's latest record, if Bound)", bindings, want)
	}
	var again [][]byte
	if _, err := ledgertable.Export(ctx, b, func(_ uint64, line []byte) error { again = append(again, line); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, lines) {
		t.Fatal("exporting the imported database does not give the same lines")
	}
}

// TestImportRefuses: an unmigrated database (ErrNoSchema), a history with a gap, a changed
// record or a broken link (ErrBroken naming the record, nothing stored: the database takes a
// whole import afterwards), and a database that holds a ledger (ErrNotEmpty).
func TestImportRefuses(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	if _, err := ledgertable.BeginImport(ctx, open(t, s, "bare", false)); !errors.Is(err, ledgertable.ErrNoSchema) {
		t.Fatalf("import into an unmigrated database: %v, want ErrNoSchema", err)
	}
	pool := open(t, s, "fleet", true)
	lines := sealed(t, 1, 40, record.ZeroHash)
	rechained := sealed(t, 20, 1, "f00d"+record.ZeroHash[4:])
	for _, c := range []struct {
		name  string
		lines [][]byte
		want  string
	}{
		{"gap", append(append([][]byte{}, lines[:9]...), lines[10:]...), "record 10: found seq 11"},
		{"changed", append(append(append([][]byte{}, lines[:26]...), bytes.Replace(lines[26], []byte(`"prod"`), []byte(`"dev"`), 1)), lines[27:]...), "record 27: hash mismatch"},
		{"link", append(append(append([][]byte{}, lines[:19]...), rechained[0]), lines[20:]...), "record 20: chain broken"},
	} {
		im, err := ledgertable.BeginImport(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range c.lines {
			if err = im.Add(ctx, line); err != nil {
				break
			}
		}
		im.Rollback(ctx)
		if !errors.Is(err, ledgertable.ErrBroken) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v; want ErrBroken naming %q", c.name, err, c.want)
		}
		if recs, leaves, head := dump(t, pool); len(recs) != 0 || len(leaves) != 0 || head.Seq != 0 {
			t.Fatalf("%s: after a refused import the database holds %d records, %d CA leaves, head %d", c.name, len(recs), len(leaves), head.Seq)
		}
	}
	if head := load(t, pool, lines); head.Seq != 40 {
		t.Fatalf("import after the refusals: head %+v", head)
	}
	im, err := ledgertable.BeginImport(ctx, pool)
	if err == nil {
		im.Rollback(ctx)
	}
	if !errors.Is(err, ledgertable.ErrNotEmpty) || !strings.Contains(err.Error(), "a head at record 40") {
		t.Fatalf("import into a database that holds a ledger: %v, want ErrNotEmpty", err)
	}
}

// TestExportWhileAppending: an export of a journal that two servers keep appending to passes
// every record up to the head it read, in order, each the line stored at its seq, and nothing
// after: a consistent prefix, although records were appended while it ran (checked).
func TestExportWhileAppending(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	pool := open(t, s, "busy", true)
	load(t, pool, sealed(t, 1, 10000, record.ZeroHash)) // more than two export pages
	var stop atomic.Bool
	var appended atomic.Int64
	var wg sync.WaitGroup
	for server := range 2 {
		j := pgstate.NewJournal(pool, pgstate.JournalOptions{MaxBatch: 8})
		for c := range 4 {
			wg.Go(func() {
				for i := 0; !stop.Load(); i++ {
					if _, err := j.Append(ctx, varied(100000*(server*4+c+1)+i)); err != nil {
						t.Error(err)
						return
					}
					appended.Add(1)
				}
			})
		}
	}
	for appended.Load() < 50 {
		time.Sleep(10 * time.Millisecond)
	}
	var lines [][]byte
	var during int64
	head, err := ledgertable.Export(ctx, pool, func(seq uint64, line []byte) error {
		if seq == 1 {
			during = appended.Load()
		}
		if seq%2500 == 0 {
			time.Sleep(50 * time.Millisecond) // a slow writer: the appenders run on meanwhile
		}
		lines = append(lines, line)
		return nil
	})
	during = appended.Load() - during
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	final, err := ledgertable.ReadHead(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if during == 0 || final.Seq <= head.Seq {
		t.Fatalf("nothing was appended during the export (%d appends, head %d then %d): the test proves nothing", during, head.Seq, final.Seq)
	}
	if uint64(len(lines)) != head.Seq {
		t.Fatalf("exported %d records, the head it read is %d", len(lines), head.Seq)
	}
	prev := record.ZeroHash
	for i, line := range lines {
		r, canonical, err := record.Decode(line)
		if err != nil || !canonical || r.Seq != uint64(i+1) || r.PrevHash != prev {
			t.Fatalf("exported record %d: seq %d, canonical %t, links %t, %v", i+1, r.Seq, canonical, r.PrevHash == prev, err)
		}
		prev = r.Hash
		var stored []byte
		if err := pool.QueryRow(ctx, `SELECT line FROM ledger_records WHERE seq = $1`, i+1).Scan(&stored); err != nil || !bytes.Equal(stored, line) {
			t.Fatalf("exported record %d is not the stored line (%v)", i+1, err)
		}
	}
	if prev != head.Hash {
		t.Fatalf("the last exported record's hash %s is not the head's %s", prev, head.Hash)
	}
	t.Logf("exported %d records while %d were appended (head now %d)", head.Seq, during, final.Seq)
}

package pgstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/ledger/record"
)

// fleetServer is one server's state on the shared database.
type fleetServer struct {
	answers *Answers
	journal *Journal
}

func newFleetServer(t *testing.T, pool *pgxpool.Pool, lease time.Duration) fleetServer {
	t.Helper()
	a, err := NewAnswers(pool, AnswersOptions{Lease: lease, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return fleetServer{answers: a, journal: NewJournal(pool, JournalOptions{})}
}

// issue is what the decision core's fn does: sign (here, make a chain naming the server),
// record the issuance through the context's claim, and return the answer.
func (s fleetServer) issue(ctx context.Context, server int, scope string) (idempotency.Entry, error) {
	r := record.Record{Decision: record.Issued, Signer: "example.com/signer", Client: "watcher", ObjectUID: scope,
		Serial: fmt.Sprintf("%x", time.Now().UnixNano()), NotBefore: time.Unix(1800000000, 0).UTC(), NotAfter: time.Unix(1800086400, 0).UTC(),
		Certificate: fmt.Sprintf("-----BEGIN CERTIFICATE-----\nserver %d %s\n-----END CERTIFICATE-----\n", server, scope)}
	r, err := s.journal.Append(ctx, r)
	if err != nil {
		return idempotency.Entry{}, err
	}
	return idempotency.Entry{Serial: r.Serial, Chain: []byte(r.Certificate), NotBefore: r.NotBefore, NotAfter: r.NotAfter, IssuedAt: r.Time, LedgerSeq: r.Seq}, nil
}

// issuedRecords counts the issued records of each object UID in the journal.
func issuedRecords(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT line FROM ledger_records`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var line []byte
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		r, _, err := record.Decode(line)
		if err != nil {
			t.Fatal(err)
		}
		if r.Decision == record.Issued {
			out[r.ObjectUID]++
		}
	}
	return out
}

// TestAnswersOneIssuancePerObjectAcrossServers: three servers, four callers each, ask for the
// same object at once, for 20 objects: each object is issued once (one fn, one issued record),
// and all twelve callers get that issuance's chain and record.
func TestAnswersOneIssuancePerObjectAcrossServers(t *testing.T) {
	s := pgtest.Start(t)
	first := migrated(t, s, "answers")
	servers := []fleetServer{newFleetServer(t, first, 30*time.Second), newFleetServer(t, secondPool(t, s, "answers"), 30*time.Second),
		newFleetServer(t, secondPool(t, s, "answers"), 30*time.Second)}
	const objects, callers = 20, 4
	var ran [objects]atomic.Int32
	type got struct {
		e   idempotency.Entry
		res idempotency.Result
	}
	results := make([][]got, objects)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for o := range objects {
		scope := fmt.Sprintf("watcher/uid-%02d", o)
		for i, srv := range servers {
			for range callers {
				wg.Go(func() {
					e, res, err := srv.answers.Do(context.Background(), scope, []byte("hash"), func(ctx context.Context) (idempotency.Entry, error) {
						ran[o].Add(1)
						return srv.issue(ctx, i, scope)
					})
					if err != nil {
						t.Errorf("%s: %v", scope, err)
						return
					}
					mu.Lock()
					results[o] = append(results[o], got{e, res})
					mu.Unlock()
				})
			}
		}
	}
	wg.Wait()
	records := issuedRecords(t, first)
	for o := range objects {
		scope := fmt.Sprintf("watcher/uid-%02d", o)
		if n := ran[o].Load(); n != 1 || records[scope] != 1 {
			t.Errorf("%s: issued %d times, %d issued records; want 1 and 1", scope, n, records[scope])
		}
		misses := 0
		for _, g := range results[o] {
			if g.res == idempotency.Miss {
				misses++
			}
			if !bytes.Equal(g.e.Chain, results[o][0].e.Chain) || g.e.LedgerSeq != results[o][0].e.LedgerSeq || g.e.LedgerSeq == 0 {
				t.Errorf("%s: answers differ: %q (seq %d) and %q (seq %d)", scope, g.e.Chain, g.e.LedgerSeq, results[o][0].e.Chain, results[o][0].e.LedgerSeq)
			}
		}
		if misses != 1 || len(results[o]) != len(servers)*callers {
			t.Errorf("%s: %d answers, %d of them issued; want %d and 1", scope, len(results[o]), misses, len(servers)*callers)
		}
	}
	// Another request for an answered object is a conflict, with the answer that stands.
	e, res, err := servers[1].answers.Do(context.Background(), "watcher/uid-03", []byte("another hash"), func(context.Context) (idempotency.Entry, error) {
		t.Fatal("fn ran for a conflicting request")
		return idempotency.Entry{}, nil
	})
	if res != idempotency.Conflict || !errors.Is(err, idempotency.ErrConflict) || !bytes.Equal(e.Chain, results[3][0].e.Chain) {
		t.Fatalf("another request for an answered object: %v, %v, %q", res, err, e.Chain)
	}
}

// TestAnswersClaimTakenOverAfterItsLease: server A claims an object and stalls (as a server
// that crashed mid-issuance, or lost the database); server B waits, takes the claim over once
// its lease runs out, and issues. When A wakes and records its issuance, the journal refuses it
// (ErrClaimLost): one issued record, B's, which every later caller gets. A failed issuance
// releases its claim at once.
func TestAnswersClaimTakenOverAfterItsLease(t *testing.T) {
	s := pgtest.Start(t)
	pool := migrated(t, s, "takeover")
	a, b := newFleetServer(t, pool, time.Second), newFleetServer(t, secondPool(t, s, "takeover"), time.Second)
	const scope = "watcher/uid-stalled"
	claimed, wake := make(chan struct{}), make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		_, _, err := a.answers.Do(context.Background(), scope, []byte("h"), func(ctx context.Context) (idempotency.Entry, error) {
			close(claimed)
			<-wake
			return a.issue(ctx, 0, scope)
		})
		aDone <- err
	}()
	<-claimed
	start := time.Now()
	e, res, err := b.answers.Do(context.Background(), scope, []byte("h"), func(ctx context.Context) (idempotency.Entry, error) {
		return b.issue(ctx, 1, scope)
	})
	if err != nil || res != idempotency.Miss || !bytes.Contains(e.Chain, []byte("server 1")) {
		t.Fatalf("B after A's lease: %v, %v, %q", res, err, e.Chain)
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Fatalf("B issued after %s, before A's lease of 1 s ran out", waited)
	}
	close(wake)
	if err := <-aDone; !errors.Is(err, ErrClaimLost) {
		t.Fatalf("A's issuance after its claim passed to B: %v, want ErrClaimLost", err)
	}
	if n := issuedRecords(t, pool)[scope]; n != 1 {
		t.Fatalf("%d issued records for the object, want 1 (B's)", n)
	}
	if e, res, err := a.answers.Do(context.Background(), scope, []byte("h"), nil); err != nil || res != idempotency.Hit || !bytes.Contains(e.Chain, []byte("server 1")) {
		t.Fatalf("A asked again: %v, %v, %q; want B's answer", res, err, e.Chain)
	}

	// A failed issuance releases its claim: the next caller runs at once, not after a lease.
	const failing = "watcher/uid-failing"
	if _, _, err := a.answers.Do(context.Background(), failing, []byte("h"), func(context.Context) (idempotency.Entry, error) {
		return idempotency.Entry{}, errors.New("the HSM refused")
	}); err == nil {
		t.Fatal("a failed issuance returned no error")
	}
	start = time.Now()
	if _, res, err := b.answers.Do(context.Background(), failing, []byte("h"), func(ctx context.Context) (idempotency.Entry, error) {
		return b.issue(ctx, 1, failing)
	}); err != nil || res != idempotency.Miss || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("after a failed issuance: %v, %v after %s; want an issuance at once", res, err, time.Since(start))
	}
	checkChain(t, pool)
}

type hookTracer struct {
	at, release chan struct{}
}

func (h *hookTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "fence = fence + 1") {
		close(h.at)
		<-h.release
	}
	return ctx
}
func (h *hookTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestAnswersTakeoverJudgedBeforeTheAnswer: server B reads A's claim as expired while A, past
// its lease, is still issuing; A's answer is stored before B's takeover: B's takeover, judged
// on the claim, must not replace the answer, and the object is issued once (B gets A's
// certificate). The review that found it paused B just before its compare-and-set.
func TestAnswersTakeoverJudgedBeforeTheAnswer(t *testing.T) {
	s := pgtest.Start(t)
	pool := migrated(t, s, "race")
	cfg, _ := pgxpool.ParseConfig(s.DSN("race"))
	cfg.ConnConfig.Password = pgtest.Password
	h := &hookTracer{at: make(chan struct{}), release: make(chan struct{})}
	cfg.ConnConfig.Tracer = h
	bpool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bpool.Close()
	a, b := newFleetServer(t, pool, time.Second), newFleetServer(t, bpool, time.Second)
	const scope = "watcher/uid-x"
	claimed := make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		_, _, err := a.answers.Do(context.Background(), scope, []byte("h"), func(ctx context.Context) (idempotency.Entry, error) {
			close(claimed)
			<-h.at // B read the expired claim and is about to take it over
			e, err := a.issue(ctx, 0, scope)
			close(h.release)
			return e, err
		})
		aDone <- err
	}()
	<-claimed
	time.Sleep(1500 * time.Millisecond) // A's lease runs out, A still issuing
	_, res, err := b.answers.Do(context.Background(), scope, []byte("h"), func(ctx context.Context) (idempotency.Entry, error) {
		return b.issue(ctx, 1, scope)
	})
	aerr := <-aDone
	if aerr != nil || err != nil || res != idempotency.Hit {
		t.Fatalf("A: %v; B: %v, %v; want A's issuance and B's hit on it", aerr, res, err)
	}
	if n := issuedRecords(t, pool)[scope]; n != 1 {
		t.Fatalf("%d issued records for one object, want 1", n)
	}
}

package idempotency_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/ledger"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func newStore(opts idempotency.Options) (*idempotency.Store, *testclock.FakeClock) {
	clk := testclock.NewFakeClock(t0)
	opts.Clock = clk
	return idempotency.New(opts), clk
}

func hashOf(s string) []byte { return base().hashWith(s) }

func (r req) hashWith(s string) []byte {
	r.request = []byte(s)
	return r.hash()
}

func entry(uid, request string) idempotency.Entry {
	return idempotency.Entry{
		Scope: uid, RequestHash: hashOf(request), Serial: "0a1b",
		Chain:     []byte("-----BEGIN CERTIFICATE-----\nleaf " + uid + "\n-----END CERTIFICATE-----\n"),
		NotBefore: t0.Add(-5 * time.Minute), NotAfter: t0.Add(time.Hour),
	}
}

func TestHitReturnsByteIdenticalChain(t *testing.T) {
	t.Parallel()
	s, _ := newStore(idempotency.Options{})
	e := entry("uid-1", "csr")
	want := bytes.Clone(e.Chain)
	s.Remember(e)
	e.Chain[0] = 'X' // the store keeps its own copy
	got, res := s.Lookup("uid-1", hashOf("csr"))
	if res != idempotency.Hit || !bytes.Equal(got.Chain, want) || got.Serial != "0a1b" || !got.IssuedAt.Equal(t0) {
		t.Fatalf("Lookup = %v %+v, want a hit with the stored chain", res, got)
	}
	got.Chain[0] = 'Y'
	again, _ := s.Lookup("uid-1", hashOf("csr"))
	if !bytes.Equal(again.Chain, want) {
		t.Error("a returned entry aliases the stored chain")
	}
	if _, res := s.Lookup("uid-2", hashOf("csr")); res != idempotency.Miss {
		t.Errorf("other UID: %v, want miss", res)
	}
}

func TestConflict(t *testing.T) {
	t.Parallel()
	s, _ := newStore(idempotency.Options{})
	s.Remember(entry("uid-1", "csr"))
	if got, res := s.Lookup("uid-1", hashOf("other csr")); res != idempotency.Conflict || got.Serial != "0a1b" {
		t.Errorf("Lookup with another hash = %v %+v, want conflict with the stored entry", res, got)
	}
	ran := false
	_, res, err := s.Do(context.Background(), "uid-1", hashOf("other csr"), func(context.Context) (idempotency.Entry, error) {
		ran = true
		return entry("uid-1", "other csr"), nil
	})
	if res != idempotency.Conflict || !errors.Is(err, idempotency.ErrConflict) || ran {
		t.Errorf("Do with another hash = %v, %v (fn ran: %v), want conflict", res, err, ran)
	}
	s.Remember(entry("uid-1", "other csr")) // the first issuance wins
	if _, res := s.Lookup("uid-1", hashOf("csr")); res != idempotency.Hit {
		t.Errorf("after a second Remember: %v, want the first entry kept", res)
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	s, clk := newStore(idempotency.Options{Retention: 24 * time.Hour})
	s.Remember(entry("uid-1", "csr"))
	clk.Step(12 * time.Hour)
	s.Remember(entry("uid-2", "csr"))
	clk.Step(12*time.Hour - time.Nanosecond)
	if _, res := s.Lookup("uid-1", hashOf("csr")); res != idempotency.Hit {
		t.Fatalf("just inside retention: %v, want hit", res)
	}
	clk.Step(time.Nanosecond)
	if _, res := s.Lookup("uid-1", hashOf("csr")); res != idempotency.Miss {
		t.Errorf("at retention: %v, want miss", res)
	}
	if st := s.Stats(); st.Entries != 1 || st.Expired != 1 {
		t.Errorf("Stats = %+v, want 1 entry and 1 expired", st)
	}
	clk.Step(12 * time.Hour)
	if st := s.Stats(); st.Entries != 0 || st.Expired != 2 {
		t.Errorf("Stats = %+v, want everything expired", st)
	}
	old := entry("uid-3", "csr")
	old.IssuedAt = clk.Now().Add(-25 * time.Hour)
	s.Remember(old)
	if _, res := s.Lookup("uid-3", hashOf("csr")); res != idempotency.Miss {
		t.Errorf("remembering an expired entry: %v, want miss", res)
	}
}

func TestBoundedSizeEvictsOldest(t *testing.T) {
	t.Parallel()
	s, clk := newStore(idempotency.Options{MaxEntries: 3})
	for i := range 5 {
		clk.Step(time.Second)
		s.Remember(entry(fmt.Sprint("uid-", i), "csr"))
	}
	for i, want := range []idempotency.Result{idempotency.Miss, idempotency.Miss, idempotency.Hit, idempotency.Hit, idempotency.Hit} {
		if _, res := s.Lookup(fmt.Sprint("uid-", i), hashOf("csr")); res != want {
			t.Errorf("uid-%d: %v, want %v", i, res, want)
		}
	}
	if st := s.Stats(); st.Entries != 3 || st.Evicted != 2 {
		t.Errorf("Stats = %+v, want 3 entries, 2 evicted", st)
	}
}

func TestLoadFromLedgerRecords(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ledger")
	clk := testclock.NewFakeClock(t0)
	l, err := ledger.Open(dir, ledger.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	add := func(r ledger.Record) {
		if _, err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Hour)
	}
	rec := func(uid, request string) ledger.Record {
		e := entry(uid, request)
		return ledger.Record{
			Decision: ledger.Issued, Signer: "example.com/signer", Client: "watcher", ObjectUID: uid,
			IdempotencyKey: idempotency.Key(uid, e.RequestHash), RequestHash: hex.EncodeToString(e.RequestHash),
			Serial: e.Serial, NotBefore: e.NotBefore, NotAfter: e.NotAfter, Certificate: string(e.Chain),
		}
	}
	add(rec("uid-old", "csr")) // t0: past retention at t0+30h
	clk.Step(6 * time.Hour)
	add(rec("uid-1", "csr"))
	add(ledger.Record{Decision: ledger.Refused, Signer: "example.com/signer", ObjectUID: "uid-2", Reason: "POLICY_VIOLATION"})
	add(rec("uid-3", "csr"))
	l.Close()

	clk.SetTime(t0.Add(30 * time.Hour))
	s := idempotency.New(idempotency.Options{Clock: clk})
	err = ledger.Replay(dir, clk.Now().Add(-idempotency.DefaultRetention), func(r ledger.Record) error {
		s.Load(r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[string]idempotency.Result{"uid-old": idempotency.Miss, "uid-1": idempotency.Hit, "uid-2": idempotency.Miss, "uid-3": idempotency.Hit} {
		got, res := s.Lookup(idempotency.Scope("watcher", uid), hashOf("csr"))
		if res != want {
			t.Errorf("%s: %v, want %v", uid, res, want)
		}
		// Answers belong to the client that was given them.
		if _, res := s.Lookup(idempotency.Scope("other-tool", uid), hashOf("csr")); res != idempotency.Miss {
			t.Errorf("%s as another client: %v, want a miss", uid, res)
		}
		if res == idempotency.Hit && (!bytes.Equal(got.Chain, entry(uid, "csr").Chain) || got.LedgerSeq == 0) {
			t.Errorf("%s: loaded %+v", uid, got)
		}
	}
	// Load skips what it cannot use, and reports what it stored.
	n := s.Load(rec("uid-4", "csr"), ledger.Record{Decision: ledger.Issued, ObjectUID: "uid-5", RequestHash: "zz"})
	if n != 0 { // uid-4's record has a zero Time: far past retention
		t.Errorf("Load stored %d, want 0", n)
	}
}

func TestDoRunsOncePerUID(t *testing.T) {
	t.Parallel()
	s, _ := newStore(idempotency.Options{})
	var runs atomic.Int32
	release := make(chan struct{})
	const n = 50
	type out struct {
		e   idempotency.Entry
		res idempotency.Result
		err error
	}
	outs := make([]out, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e, res, err := s.Do(context.Background(), "uid-1", hashOf("csr"), func(context.Context) (idempotency.Entry, error) {
				runs.Add(1)
				<-release
				return entry("uid-1", "csr"), nil
			})
			outs[i] = out{e, res, err}
		})
	}
	time.Sleep(20 * time.Millisecond) // let every goroutine reach Do
	close(release)
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("fn ran %d times, want 1", runs.Load())
	}
	misses := 0
	for i, o := range outs {
		if o.err != nil || !bytes.Equal(o.e.Chain, entry("uid-1", "csr").Chain) {
			t.Errorf("caller %d: %+v", i, o)
		}
		if o.res == idempotency.Miss {
			misses++
		}
	}
	if misses != 1 {
		t.Errorf("%d callers saw a miss, want exactly the one that issued", misses)
	}
}

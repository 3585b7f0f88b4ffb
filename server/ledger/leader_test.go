package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/ledger"
)

// Batches are written by the Appends themselves: when a batch is capped at MaxBatch, the lead
// passes from batch to batch until every waiting record is written, and none is lost or
// written twice.
func TestLeadPassesOnAcrossCappedBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.maxBatch = 3
	ff := &faultyFile{syncDelay: time.Millisecond}
	l := f.openFaulty(t, ff)
	const n = 40
	recs, errs := appendConcurrently(l, n)
	seen := map[uint64]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Append %d: %v", i, errs[i])
		}
		if seen[recs[i].Seq] {
			t.Fatalf("seq %d returned twice", recs[i].Seq)
		}
		seen[recs[i].Seq] = true
	}
	st := l.Stats()
	if st.Records != n || st.Batches < n/3 {
		t.Errorf("Stats = %+v, want %d records in at least %d batches of at most 3", st, n, n/3)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != n || rep.LastSeq != n {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

// Close while a batch is being written waits for it; records queued behind it are either in
// a batch (and durable) or refused with ErrClosed, never left waiting.
func TestCloseDuringBatchAnswersEveryAppend(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ff := &faultyFile{syncGate: make(chan struct{})}
	l := f.openFaulty(t, ff)
	first := startBlockedAppend(l, ff)
	const queued = 5
	var wg sync.WaitGroup
	errs := make([]error, queued)
	for i := range queued {
		wg.Go(func() { _, errs[i] = l.Append(context.Background(), issued(2+i)) })
	}
	closed := make(chan error, 1)
	go func() {
		time.Sleep(20 * time.Millisecond) // the queued Appends are waiting by now
		closed <- l.Close()
	}()
	time.Sleep(40 * time.Millisecond)
	select {
	case <-closed:
		t.Fatal("Close returned while a batch was still being written")
	default:
	}
	close(ff.syncGate)
	if err := <-first; err != nil {
		t.Errorf("first Append: %v", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	durable := 1
	for i, err := range errs {
		switch {
		case err == nil:
			durable++
		case !errors.Is(err, ledger.ErrClosed):
			t.Errorf("queued Append %d: %v, want success or ErrClosed", i, err)
		}
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != durable {
		t.Errorf("Verify: %+v, %v; want the %d acknowledged records", rep, err, durable)
	}
}

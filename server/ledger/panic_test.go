package ledger_test

import (
	"context"
	"errors"

	"sync"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/ledger"
)

// TestWriterPanicIsContained: a panic while a batch is written (here the segment's write
// panics after writing half the batch) goes on up to the Append that led the batch, and the
// ledger does not stay stuck: the batch's other Appends are answered ErrUnavailable, the
// ledger is closed for appends like after a failed write, recovers (the half-written
// bytes are zeroed), then appends again; nothing unacknowledged is in the history, and it
// verifies.
func TestWriterPanicIsContained(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // no recovery by itself: the test recovers it (ledger.Recover)
	ff := &faultyFile{}
	l := f.openFaulty(t, ff)
	for i := range 3 {
		if _, err := l.Append(context.Background(), issued(i)); err != nil {
			t.Fatal(err)
		}
	}
	ff.panicWrite.Store(true)
	const n = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		panicked int
		failed   int
	)
	for i := range n {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					mu.Lock()
					panicked++
					mu.Unlock()
				}
			}()
			_, err := l.Append(context.Background(), issued(100+i))
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, ledger.ErrUnavailable) {
				failed++
			} else {
				t.Errorf("an Append during the panic answered %v, want ErrUnavailable", err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Appends are stuck after the writer panicked")
	}
	if panicked < 1 || panicked+failed != n {
		t.Fatalf("%d Appends panicked and %d failed, want at least one panic (the fault struck) and the rest failed", panicked, failed)
	}
	ff.panicWrite.Store(false)
	if err := l.Err(); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("Err() after the writer panicked = %v, want the ledger closed for appends (ErrUnavailable)", err)
	}
	ledger.Recover(l)
	if _, err := l.Append(context.Background(), issued(200)); err != nil {
		t.Fatalf("the ledger did not recover after the writer panicked: %v", err)
	}
	rep, err := ledger.Verify(f.dir)
	if err != nil || rep.Records != 4 || rep.TornTail != 0 {
		t.Errorf("Verify after recovery: %+v, %v; want the 3 records before and the 1 after, nothing torn", rep, err)
	}
}

package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/ledger"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// faultyFile counts syncs and injects failures and delays into the segment's writes and syncs.
type faultyFile struct {
	ledger.File
	syncs        atomic.Int64
	failSync     atomic.Bool
	shortWrite   atomic.Bool // write half the batch, then fail
	panicWrite   atomic.Bool // write half the batch, then panic (a bug under the writer)
	failZeroFill atomic.Bool // fail writes of zeros (extensions of the free space)
	// zeroLimit, if not 0, is the size past which writes of zeros fail with ENOSPC, after
	// writing what fits before it, as on a full file system.
	zeroLimit atomic.Int64
	syncDelay time.Duration
	syncGate  chan struct{} // if not nil, Sync waits for it
	mu        sync.Mutex
	writes    []int // sizes of the writes of records (not of zeros)
}

var errInjected = errors.New("injected: no space left on device")

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	zeros := bytes.Count(p, []byte{0}) == len(p)
	if !zeros {
		f.mu.Lock()
		f.writes = append(f.writes, len(p))
		f.mu.Unlock()
	}
	if zeros && f.failZeroFill.Load() {
		return 0, errInjected
	}
	if limit := f.zeroLimit.Load(); zeros && limit != 0 && off+int64(len(p)) > limit {
		n, _ := f.File.WriteAt(p[:max(0, limit-off)], off)
		return n, syscall.ENOSPC
	}
	if f.shortWrite.Load() {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, errInjected
	}
	if !zeros && f.panicWrite.Load() {
		_, _ = f.File.WriteAt(p[:len(p)/2], off)
		panic("injected: the writer panics mid-write")
	}
	return f.File.WriteAt(p, off)
}

// recordWrites returns the sizes of the writes of records so far.
func (f *faultyFile) recordWrites() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.writes...)
}

func (f *faultyFile) Sync() error {
	f.syncs.Add(1)
	if f.syncGate != nil {
		<-f.syncGate
	}
	time.Sleep(f.syncDelay)
	if f.failSync.Load() {
		return errInjected
	}
	return f.File.Sync()
}

func (f *fixture) openFaulty(t *testing.T, ff *faultyFile) *ledger.Ledger {
	t.Helper()
	opts := f.options()
	opts.WrapFile = func(inner ledger.File) ledger.File { ff.File = inner; return ff }
	l, err := ledger.Open(f.dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appendConcurrently starts n Appends at once and returns their results.
func appendConcurrently(l *ledger.Ledger, n int) ([]ledger.Record, []error) {
	recs, errs := make([]ledger.Record, n), make([]error, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Go(func() {
			start.Wait()
			recs[i], errs[i] = l.Append(context.Background(), issued(i))
		})
	}
	start.Done()
	wg.Wait()
	return recs, errs
}

func TestConcurrentAppendsAreGroupCommitted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ff := &faultyFile{syncDelay: 2 * time.Millisecond}
	l := f.openFaulty(t, ff)
	const n = 64
	recs, errs := appendConcurrently(l, n)
	seen := map[uint64]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Append %d: %v", i, errs[i])
		}
		seen[recs[i].Seq] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct seqs, want %d", len(seen), n)
	}
	rep, err := ledger.Verify(f.dir)
	if err != nil || rep.Records != n || rep.LastSeq != n {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	syncs := ff.syncs.Load()
	if syncs > n/8 {
		t.Errorf("%d fsyncs for %d concurrent appends, want at most %d", syncs, n, n/8)
	}
	if st := l.Stats(); st.Records != n || st.Syncs != uint64(syncs) || st.Batches+st.Extensions != uint64(syncs) {
		t.Errorf("Stats = %+v, want %d records and %d syncs, one per batch or extension", st, n, syncs)
	}
	t.Logf("%d appends, %d fsyncs", n, syncs)
}

// TestSyncFailureRecovers: a failed fsync fails its batch and closes the ledger; it stays
// closed while the storage still fails, then recovers by itself: the records whose sync failed
// (their callers were told nothing was issued) are not in the history, and the chain goes on
// from the last acknowledged record.
func TestSyncFailureRecovers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.recoverEvery = 5 * time.Millisecond
	ff := &faultyFile{}
	l := f.openFaulty(t, ff)
	if _, err := l.Append(context.Background(), issued(0)); err != nil {
		t.Fatal(err)
	}
	ff.failSync.Store(true)
	_, errs := appendConcurrently(l, 16)
	for i, err := range errs {
		if !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, errInjected) || errors.Is(err, ledger.ErrRestartRequired) {
			t.Errorf("waiter %d: err = %v, want ErrUnavailable wrapping the sync error, retryable", i, err)
		}
	}
	// Still failing: recovery attempts fsync and fail; the ledger stays closed.
	syncs := ff.syncs.Load()
	waitFor(t, "recovery attempts", func() bool { return ff.syncs.Load() >= syncs+3 })
	if _, err := l.Append(context.Background(), issued(99)); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("Append while the storage fails: err = %v, want ErrUnavailable", err)
	}
	ff.failSync.Store(false) // the storage comes back
	waitFor(t, "recovery", func() bool { return l.Err() == nil })
	if r, err := l.Append(context.Background(), issued(100)); err != nil || r.Seq != 2 {
		t.Fatalf("Append after recovery: %+v, %v; want seq 2", r, err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 2 || rep.TornTail != 0 {
		t.Errorf("Verify after recovery: %+v, %v; want the 2 acknowledged records only", rep, err)
	}
	if st := l.Stats(); st.Recoveries != 1 {
		t.Errorf("Stats.Recoveries = %d, want 1", st.Recoveries)
	}
	// Reopening sees the same history.
	l.Close()
	if seq, _ := f.open(t).Last(); seq != 2 {
		t.Errorf("reopened at seq %d, want 2", seq)
	}
}

// TestShortWriteRecovers: a write cut short fails its batch; recovery clears its bytes.
func TestShortWriteRecovers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ff := &faultyFile{}
	l := f.openFaulty(t, ff)
	for i := range 3 {
		if _, err := l.Append(context.Background(), issued(i)); err != nil {
			t.Fatal(err)
		}
	}
	ff.shortWrite.Store(true)
	if _, err := l.Append(context.Background(), issued(3)); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("short write: err = %v, want ErrUnavailable", err)
	}
	ff.shortWrite.Store(false)
	if _, err := l.Append(context.Background(), issued(4)); !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("Append after a partial batch, before recovery: err = %v, want ErrUnavailable", err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 3 || rep.TornTail == 0 {
		t.Fatalf("Verify: %+v, %v; want 3 records and a torn tail", rep, err)
	}
	ledger.Recover(l)
	if err := l.Err(); err != nil {
		t.Fatalf("Err after recovery = %v", err)
	}
	if r, err := l.Append(context.Background(), issued(4)); err != nil || r.Seq != 4 {
		t.Fatalf("Append after recovery: %+v, %v", r, err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 4 || rep.TornTail != 0 {
		t.Errorf("Verify after recovery: %+v, %v", rep, err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestAppendContextBoundsOnlyTheWaitToJoin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ff := &faultyFile{syncGate: make(chan struct{})}
	l := f.openFaulty(t, ff)
	first := startBlockedAppend(l, ff)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Append(ctx, issued(2)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Append while the writer is busy: err = %v, want DeadlineExceeded", err)
	}
	close(ff.syncGate)
	if err := <-first; err != nil {
		t.Errorf("first Append: %v", err)
	}
	if seq, _ := l.Last(); seq != 1 {
		t.Errorf("last seq %d, want 1", seq)
	}
}

// startBlockedAppend starts an Append of issued(1) and returns once its batch is blocked in
// Sync (ff.syncGate must be set); the channel gets the Append's error.
func startBlockedAppend(l *ledger.Ledger, ff *faultyFile) <-chan error {
	first := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), issued(1))
		first <- err
	}()
	for ff.syncs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	return first
}

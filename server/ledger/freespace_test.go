package ledger_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/ledger"
)

// writeAt writes b into the segment at off, as a crash or a hand would leave it.
func (f *fixture) writeAt(t *testing.T, b string, off int64) {
	t.Helper()
	seg, err := os.OpenFile(f.segment(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if _, err := seg.WriteAt([]byte(b), off); err != nil {
		t.Fatal(err)
	}
}

// used returns the bytes of the segment's records.
func (f *fixture) used(t *testing.T) int64 {
	t.Helper()
	lines := f.lines(t)
	return int64(len(strings.Join(lines[:len(lines)-1], "")))
}

// TestFreeSpaceIsNotTorn: the Ledger keeps zero-filled free space after its records, in
// chunks of Options.Preallocate; Verify reports it as free space, not as a torn tail.
func TestFreeSpaceIsNotTorn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.fill(t, 10)
	size, used := f.size(t), f.used(t)
	if size%(4<<20) != 0 || size <= used {
		t.Errorf("segment of %d bytes for %d bytes of records, want a multiple of 4 MiB after them", size, used)
	}
	rep, err := ledger.Verify(f.dir)
	if err != nil || rep.Records != 10 || rep.TornTail != 0 || rep.FreeSpace != size-used {
		t.Errorf("Verify: %+v, %v; want 10 records, no torn tail and %d bytes of free space", rep, err, size-used)
	}
}

// TestTornWriteInFreeSpaceIsRepaired: what a crash can leave of an unacknowledged write in the
// free space, within MaxWrite of the last record, is a torn tail: Verify reports it, Open
// truncates it (and makes free space again), and the chain continues. An overwrite in place
// does not reach the disk in order, so a later block of the write can land without an earlier.
func TestTornWriteInFreeSpaceIsRepaired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		torn func(line string) (string, int64) // the bytes to write after the last record, and where
		want func(line string) int64           // Report.TornTail
	}{
		{"torn line then zeros",
			func(line string) (string, int64) { return line[:100], 0 },
			func(string) int64 { return 100 }},
		{"later block without the earlier",
			func(line string) (string, int64) { return line[200:], 4096 },
			func(line string) int64 { return 4096 + int64(len(line)) - 200 }},
		{"complete lines after a hole",
			func(line string) (string, int64) { return line + line, 512 },
			func(line string) int64 { return 512 + 2*int64(len(line)) }},
		{"torn byte at the end of the reach",
			func(string) (string, int64) { return "x", ledger.MaxWrite - 1 },
			func(string) int64 { return ledger.MaxWrite }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.fill(t, 3)
			used := f.used(t)
			line := strings.Replace(f.lines(t)[2], `"seq":3`, `"seq":4`, 1) // as an unacknowledged 4th would be
			b, off := tc.torn(line)
			f.writeAt(t, b, used+off)
			want := tc.want(line)

			rep, err := ledger.Verify(f.dir)
			if err != nil || rep.Records != 3 || rep.TornTail != want || rep.FreeSpace != f.size(t)-used-want {
				t.Fatalf("Verify: %+v, %v; want 3 records and a torn tail of %d bytes", rep, err, want)
			}
			l := f.open(t)
			if !strings.Contains(f.log.String(), "truncating a torn final line") {
				t.Errorf("no warning logged: %q", f.log.String())
			}
			if r, err := l.Append(context.Background(), issued(4)); err != nil || r.Seq != 4 {
				t.Fatalf("Append after recovery: %+v, %v", r, err)
			}
			if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 4 || rep.TornTail != 0 || rep.FreeSpace == 0 {
				t.Errorf("Verify after recovery: %+v, %v", rep, err)
			}
		})
	}
}

// TestDataInFreeSpaceIsCorruption: non-zero bytes in the free space beyond the reach of a torn
// write were not written by the ledger: Verify reports them with their line and offset, and
// Open refuses the ledger rather than erase them.
func TestDataInFreeSpaceIsCorruption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		writes map[int64]string // offset after the last record → bytes
		at     int64            // where the problem is, after the last record
		line   int
	}{
		{"bytes far after the records", map[int64]string{2 << 20: `{"seq":4}` + "\n"}, 2 << 20, 4},
		{"just beyond the reach", map[int64]string{ledger.MaxWrite: "x"}, ledger.MaxWrite, 4},
		{"after a torn write", map[int64]string{0: "torn", 100: "li\nne\n", ledger.MaxWrite + 5: "x"}, ledger.MaxWrite + 5, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.fill(t, 3)
			used := f.used(t)
			for off, b := range tc.writes {
				f.writeAt(t, b, used+off)
			}
			rep, err := ledger.Verify(f.dir)
			var ce *ledger.CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ledger.ErrCorrupt) {
				t.Fatalf("Verify: %+v, %v; want a CorruptionError", rep, err)
			}
			if ce.Line != tc.line || ce.Offset != used+tc.at || ce.Seq != 4 || rep.Records != 3 ||
				!strings.Contains(ce.Problem, "data in the zero-filled free space after the last record") {
				t.Errorf("problem %q at line %d, offset %d, seq %d, after %d records; want line %d, offset %d, seq 4, after 3",
					ce.Problem, ce.Line, ce.Offset, ce.Seq, rep.Records, tc.line, used+tc.at)
			}
			if _, err := ledger.Open(f.dir, f.options()); !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), ce.Problem) {
				t.Errorf("Open: err = %v, want the same problem", err)
			}
		})
	}
}

// TestOpenOldLedgerAddsFreeSpace: a ledger without free space (written before it existed)
// verifies, opens, gets free space and continues.
func TestOpenOldLedgerAddsFreeSpace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.fill(t, 5)
	lines := f.lines(t)
	f.write(t, lines[:len(lines)-1])
	used := f.used(t)
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 5 || rep.TornTail != 0 || rep.FreeSpace != 0 {
		t.Fatalf("Verify of the old ledger: %+v, %v", rep, err)
	}
	l := f.open(t)
	if size := f.size(t); size%(4<<20) != 0 || size-used < 1<<20 {
		t.Errorf("after Open: %d bytes for %d bytes of records, want a multiple of 4 MiB and at least 1 MiB free", size, used)
	}
	if r, err := l.Append(context.Background(), issued(6)); err != nil || r.Seq != 6 {
		t.Fatalf("Append: %+v, %v", r, err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 6 || rep.FreeSpace != f.size(t)-f.used(t) {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
	if strings.Contains(f.log.String(), "torn") {
		t.Errorf("a torn tail was reported: %s", f.log.String())
	}
}

// TestOldLedgerLongTornLine: a ledger without free space can end with an unterminated line
// of any length (its writer appended batches of any size); with no zero byte before it ends,
// it is a torn tail however long.
func TestOldLedgerLongTornLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.fill(t, 3)
	lines := f.lines(t)
	f.write(t, append(lines[:len(lines)-1], strings.Repeat("x", ledger.MaxWrite+100)))
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 3 || rep.TornTail != ledger.MaxWrite+100 || rep.FreeSpace != 0 {
		t.Fatalf("Verify: %+v, %v; want 3 records and the line as a torn tail", rep, err)
	}
	l := f.open(t)
	if r, err := l.Append(context.Background(), issued(4)); err != nil || r.Seq != 4 {
		t.Fatalf("Append after recovery: %+v, %v", r, err)
	}
}

// TestSegmentGrowsInChunks: when the free space runs out, the segment grows by
// Options.Preallocate of zeros, each extension one write and one fsync counted in Stats.
func TestSegmentGrowsInChunks(t *testing.T) {
	t.Parallel()
	const chunk = 64 << 10
	f := newFixture(t)
	f.prealloc = chunk
	l := f.open(t)
	if size := f.size(t); size != chunk {
		t.Fatalf("new segment of %d bytes, want one chunk of %d", size, chunk)
	}
	for i := range 300 {
		if _, err := l.Append(context.Background(), issued(i)); err != nil {
			t.Fatal(err)
		}
	}
	size, used := f.size(t), f.used(t)
	st := l.Stats()
	if size%chunk != 0 || size-used >= chunk || st.Extensions != uint64(size/chunk-1) || st.Extensions < 2 {
		t.Errorf("%d bytes for %d bytes of records after %d extensions; want chunks of %d, less than one free, one extension each",
			size, used, st.Extensions, chunk)
	}
	if st.Batches != 300 || st.Syncs != st.Batches+st.Extensions {
		t.Errorf("Stats = %+v, want 300 batches and one fsync per batch and per extension", st)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 300 || rep.FreeSpace != size-used {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

// TestBatchLargerThanFreeSpace: a record, or a batch, larger than the free space (and than a
// chunk) extends the segment by as many chunks as it needs.
func TestBatchLargerThanFreeSpace(t *testing.T) {
	t.Parallel()
	const chunk = 4 << 10
	f := newFixture(t)
	f.prealloc = chunk
	ff := &faultyFile{syncDelay: 2 * time.Millisecond}
	l := f.openFaulty(t, ff)
	big := issued(0)
	big.Message = strings.Repeat("m", 3*chunk)
	if _, err := l.Append(context.Background(), big); err != nil {
		t.Fatalf("Append of a record bigger than the free space: %v", err)
	}
	if _, errs := appendConcurrently(l, 64); errors.Join(errs...) != nil {
		t.Fatalf("concurrent Appends: %v", errors.Join(errs...))
	}
	writes := ff.recordWrites()
	largest := 0
	for _, n := range writes {
		largest = max(largest, n)
	}
	if st := l.Stats(); st.Records != 65 || len(writes) >= 65 || largest <= 3*chunk {
		t.Errorf("Stats = %+v, %d writes, the largest of %d bytes; want writes of several records, bigger than a chunk", st, len(writes), largest)
	}
	size, used := f.size(t), f.used(t)
	if size%chunk != 0 || size-used >= chunk {
		t.Errorf("%d bytes for %d bytes of records, want chunks of %d and less than one free", size, used, chunk)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 65 || rep.TornTail != 0 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

// TestBigBatchIsWrittenInPieces: a batch of more than MaxWrite bytes is written (and fsynced)
// in pieces of at most MaxWrite, so no torn write reaches further; a record longer than that
// is refused without harm to the ledger.
func TestBigBatchIsWrittenInPieces(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ff := &faultyFile{syncGate: make(chan struct{})}
	l := f.openFaulty(t, ff)
	huge := issued(0)
	huge.Message = strings.Repeat("m", ledger.MaxWrite)
	if _, err := l.Append(context.Background(), huge); !errors.Is(err, ledger.ErrInvalidRecord) {
		t.Fatalf("Append of a record longer than MaxWrite: err = %v, want ErrInvalidRecord", err)
	}
	big := func(i int) ledger.Record {
		r := issued(i)
		r.Message = strings.Repeat("m", 300<<10)
		return r
	}
	first := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), big(1))
		first <- err
	}()
	for ff.syncs.Load() == 0 { // the writer is now blocked in Sync; the next eight wait to join
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	var started, failed atomic.Int64
	for i := range 8 {
		wg.Go(func() {
			started.Add(1)
			if _, err := l.Append(context.Background(), big(2+i)); err != nil {
				t.Errorf("Append: %v", err)
				failed.Add(1)
			}
		})
	}
	for started.Load() < 8 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // for all eight to be waiting to hand their record over
	close(ff.syncGate)
	wg.Wait()
	if err := <-first; err != nil || failed.Load() != 0 {
		t.Fatalf("Appends failed: %v", err)
	}
	writes := ff.recordWrites()
	for _, n := range writes {
		if n > ledger.MaxWrite {
			t.Errorf("a write of %d bytes, more than %d", n, ledger.MaxWrite)
		}
	}
	if st := l.Stats(); st.Records != 9 || st.Batches != uint64(len(writes)) || len(writes) >= 9 || l.Err() != nil {
		t.Errorf("Stats = %+v, writes %v, Err %v; want 9 records in writes of several", st, writes, l.Err())
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 9 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

// TestExtensionFailureFailsClosed: when the free space cannot be extended, the batch fails as
// if its own write had, and so does every later Append until the ledger is reopened.
func TestExtensionFailureFailsClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.prealloc = 4 << 10
	ff := &faultyFile{}
	l := f.openFaulty(t, ff)
	if _, err := l.Append(context.Background(), issued(1)); err != nil {
		t.Fatal(err)
	}
	ff.failZeroFill.Store(true)
	big := issued(2)
	big.Message = strings.Repeat("m", 8<<10)
	if _, err := l.Append(context.Background(), big); !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, errInjected) {
		t.Fatalf("Append needing an extension: err = %v, want ErrUnavailable wrapping the write error", err)
	}
	ff.failZeroFill.Store(false)
	if _, err := l.Append(context.Background(), issued(3)); !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(l.Err(), errInjected) {
		t.Errorf("Append after the failure: err = %v, Err() = %v; want it closed for appends", err, l.Err())
	}
	l.Close()
	l2 := f.open(t)
	if r, err := l2.Append(context.Background(), big); err != nil || r.Seq != 2 {
		t.Fatalf("Append after reopen: %+v, %v", r, err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 2 || rep.TornTail != 0 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

// TestVerifyWhileAppending: a reader racing the writer (and its extensions) sees a prefix of
// the chain, perhaps with a torn tail, never a corruption.
func TestVerifyWhileAppending(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.prealloc = 16 << 10
	l := f.open(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var appended atomic.Int64
	for range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := l.Append(context.Background(), issued(i)); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				appended.Add(1)
			}
		})
	}
	deadline := time.Now().Add(500 * time.Millisecond)
	verifies, last := 0, 0
	for ; time.Now().Before(deadline); verifies++ {
		rep, err := ledger.Verify(f.dir)
		if err != nil {
			t.Fatalf("Verify while appending: %v", err)
		}
		if rep.Records < last {
			t.Fatalf("Verify saw %d records after %d", rep.Records, last)
		}
		last = rep.Records
	}
	close(stop)
	wg.Wait()
	rep, err := ledger.Verify(f.dir)
	if err != nil || rep.Records != int(appended.Load()) || rep.TornTail != 0 {
		t.Errorf("Verify after: %+v, %v; want %d records", rep, err, appended.Load())
	}
	t.Logf("%d verifies during %d appends, %d extensions", verifies, appended.Load(), l.Stats().Extensions)
}

package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger"
)

// appendMany appends n records to l from 64 goroutines (so that they are group-committed):
// a Rotated record first, then issued and refused records for objects from..from+n-2.
func appendMany(t *testing.T, l *ledger.Ledger, from, n int) {
	t.Helper()
	if _, err := l.Append(context.Background(), rotated("example.com/signer", fmt.Sprintf("%064x", 1))); err != nil {
		t.Fatal(err)
	}
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= from+n-1 {
					return
				}
				r := refused(i)
				if i%10 == 0 {
					r = issued(i)
				}
				if _, err := l.Append(context.Background(), r); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestStartIsBoundedByTheWindowNotTheHistory writes 20,000 and then 200,000 records, all older
// than the idempotency window, and opens each ledger as the server does: the records read at
// start must not grow with the history (the tree's edge, the last indexed record and the state
// records only), and Replay must see the state record and nothing else.
func TestStartIsBoundedByTheWindowNotTheHistory(t *testing.T) {
	now := time.Now()
	old := now.Add(-72 * time.Hour)
	read := map[int]uint64{}
	for _, n := range []int{20_000, 200_000} {
		dir := filepath.Join(t.TempDir(), "ledger")
		l, err := ledger.Open(dir, ledger.Options{Clock: testclock.NewFakePassiveClock(old)})
		if err != nil {
			t.Fatal(err)
		}
		appendMany(t, l, 0, n)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		var replayed []ledger.Record
		l, err = ledger.Open(dir, ledger.Options{ReplayFrom: now.Add(-24 * time.Hour), Replay: func(r ledger.Record) error {
			replayed = append(replayed, r)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		st := l.Stats()
		seq, _ := l.Last()
		if seq != uint64(n) || l.Tree().Size() != int64(n) {
			t.Fatalf("%d records: reopened at seq %d, tree %d", n, seq, l.Tree().Size())
		}
		// The Rotated record, and the signer's latest issuance as the index keeps it.
		if len(replayed) != 2 || replayed[0].Decision != ledger.Rotated || replayed[0].Seq != 1 ||
			replayed[1].Decision != ledger.Issued || !replayed[1].NotAfter.Equal(t0.Add(24*time.Hour)) || replayed[1].Signer != "example.com/signer" {
			t.Errorf("%d records: replayed %d records (%+v), want the Rotated record 1 and the latest issuance", n, len(replayed), replayed)
		}
		// The last indexed record, at most 255 of the tree's edge, one state record.
		if st.ReadAtOpen > 1+255+1 {
			t.Errorf("%d records: Open read %d records, want at most 257", n, st.ReadAtOpen)
		}
		read[n] = st.ReadAtOpen
		t.Logf("%d records: Open read %d", n, st.ReadAtOpen)

		// Records of the window are replayed, and only they beside the state.
		clk := testclock.NewFakePassiveClock(now)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = ledger.Open(dir, ledger.Options{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := l.Append(context.Background(), refused(n+i)); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		replayed = nil
		l, err = ledger.Open(dir, ledger.Options{ReplayFrom: now.Add(-24 * time.Hour), Replay: func(r ledger.Record) error {
			replayed = append(replayed, r)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if len(replayed) != 12 || replayed[2].Seq != uint64(n)+1 {
			t.Errorf("%d records + 10 in the window: replayed %d (want the Rotated record, the latest issuance and the 10)", n, len(replayed))
		}
		if got := l.Stats().ReadAtOpen; got > 1+255+1+10 {
			t.Errorf("%d records + 10 in the window: Open read %d records", n, got)
		}
		l.Close()
	}
	// Judged by records read, not time: ten times the history costs at most the tree's edge more.
	if read[200_000] > read[20_000]+255 {
		t.Errorf("Open read %d records of 200,000 and %d of 20,000: it grows with the history", read[200_000], read[20_000])
	}
}

func first(rs []ledger.Record) ledger.Record {
	if len(rs) == 0 {
		return ledger.Record{}
	}
	return rs[0]
}

// TestIndexCatchesUpAfterACrash copies a ledger whose last records were never indexed (what a
// crash leaves: the index is written every IndexInterval) and opens the copy: Open reads those
// records, not the history, and indexes them (lookups find them).
func TestIndexCatchesUpAfterACrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledger")
	l, err := ledger.Open(dir, ledger.Options{IndexInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	appendMany(t, l, 0, 3000)
	if err := l.Close(); err != nil { // Close indexes everything
		t.Fatal(err)
	}
	l, err = ledger.Open(dir, ledger.Options{IndexInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if _, err := l.Append(context.Background(), issued(100_000+i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.Stats().Indexed; got != 3000 {
		t.Fatalf("indexed %d records before the crash, want 3000 (the interval is an hour)", got)
	}
	crashed := copyDir(t, dir) // the ledger is still open: its index stops at 3000
	l.Close()

	l, err = ledger.Open(crashed, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st := l.Stats()
	if st.ReadAtOpen < 500 || st.ReadAtOpen > 500+1+255 {
		t.Errorf("Open read %d records, want the 500 not indexed (and at most the tree's edge and the last indexed)", st.ReadAtOpen)
	}
	recs, err := l.Find("", fmt.Sprintf("%x", 100_000+499+1))
	if err != nil || len(recs) != 1 || recs[0].Seq != 3500 {
		t.Fatalf("Find by the serial of the last record: %v, %v; want record 3500", recs, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Verify(crashed); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the files of dir (one level, and the tiles tree) to a new folder.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "copy")
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		dst := filepath.Join(to, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, fi.Mode().Perm()|0o200)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// verifyInclusion proves record seq against the tree's current root and checks the proof
// with the record's line as the ledger serves it.
func verifyInclusion(t *testing.T, l *ledger.Ledger, seq uint64) {
	t.Helper()
	tree := l.Tree()
	size := tree.Size()
	line, err := l.Line(seq)
	if err != nil {
		t.Fatalf("record %d: %v", seq, err)
	}
	proof, err := tree.ProveInclusion(int64(seq)-1, size)
	if err != nil {
		t.Fatalf("record %d: %v", seq, err)
	}
	root, err := tree.RootAt(size)
	if err != nil {
		t.Fatal(err)
	}
	if err := ledgerproof.VerifyInclusion(line, int64(seq)-1, proof, ledgerproof.Checkpoint{Size: size, Hash: root}); err != nil {
		t.Fatalf("record %d at size %d: %v", seq, size, err)
	}
}

// TestIndexWaitsForFreeSpace: on a nearly full file system the index is not written (it would
// eat the headroom the checkpoint needs): appends go on, the records wait in memory and are
// found there, and the index catches up once space is freed.
func TestIndexWaitsForFreeSpace(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 20)
	dir := filepath.Join(t.TempDir(), "ledger")
	opts := ledger.WithFreeSpace(ledger.Options{IndexInterval: 10 * time.Millisecond, Preallocate: 64 << 10},
		func() (int64, bool) { return free.Load(), true })
	l, err := ledger.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 50 {
		if _, err := l.Append(context.Background(), issued(i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // ten index intervals
	if st := l.Stats(); st.Indexed != 0 || st.Unindexed != 50 {
		t.Fatalf("with 1 MiB free: indexed %d, %d waiting; want none indexed", st.Indexed, st.Unindexed)
	}
	if recs, err := l.Find("uid-0007", ""); err != nil || len(recs) != 1 {
		t.Fatalf("Find of a record waiting for the index: %v, %v", recs, err)
	}
	free.Store(1 << 30)
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().Indexed != 50 {
		if time.Now().After(deadline) {
			t.Fatalf("the index did not catch up once space was freed: %+v", l.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRefusedStartReleasesTheIndex: a start that distrusts its index, rebuilds it and then
// refuses the ledger releases the new index too, so the next start in the same process gets
// the same refusal, not a lock held by the one before.
func TestRefusedStartReleasesTheIndex(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledger")
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := l.Append(context.Background(), refused(i)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	seg := filepath.Join(dir, "ledger-000001.jsonl")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// A line in the middle made longer: the index's positions no longer hold, and the chain breaks.
	at := bytes.Index(data, []byte(`"seq":5,`))
	data = append(data[:at:at], append([]byte(`"seq":5, `), data[at+len(`"seq":5,`):]...)...)
	if err := os.WriteFile(seg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := ledger.Open(dir, ledger.Options{}); !errors.Is(err, ledger.ErrCorrupt) {
			t.Fatalf("start %d: %v, want ErrCorrupt", i+1, err)
		}
	}
}

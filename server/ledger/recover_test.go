package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/ledger"
)

// appendN appends n issued records and fails the test on any error.
func appendN(t *testing.T, l *ledger.Ledger, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := l.Append(context.Background(), issued(i)); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
}

// TestSegmentRemovedIsRestored: the segment is removed (rm, a cleanup job) under a running
// ledger. The next check (here the idle ledger's, as its recovery loop runs it every tick)
// restores the segment at its path from the file still open, with every acknowledged record,
// and appends go on into it. A batch that finds the segment removed is restored with it and
// acknowledged in the restored file.
func TestSegmentRemovedIsRestored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l := f.open(t)
	appendN(t, l, 0, 5)
	if err := os.Remove(filepath.Join(f.dir, segment)); err != nil {
		t.Fatal(err)
	}
	ledger.CheckSegment(l)
	if err := l.Err(); err != nil {
		t.Fatalf("Err after the check = %v", err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 5 {
		t.Fatalf("Verify of the restored segment: %+v, %v; want the 5 acknowledged records", rep, err)
	}
	if r, err := l.Append(context.Background(), issued(6)); err != nil || r.Seq != 6 {
		t.Fatalf("Append after the restore: %+v, %v; want seq 6", r, err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 6 {
		t.Errorf("Verify after appending to the restored segment: %+v, %v", rep, err)
	}
	if !strings.Contains(f.log.String(), "restored it from the open file") {
		t.Errorf("log does not say the segment was restored:\n%s", f.log)
	}

	// Removed again, found by a batch: acknowledged, in the restored file.
	if err := os.Remove(filepath.Join(f.dir, segment)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond) // past the batches' least time between two checks
	if r, err := l.Append(context.Background(), issued(7)); err != nil || r.Seq != 7 {
		t.Fatalf("Append finding the segment removed: %+v, %v; want it acknowledged as seq 7", r, err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 7 {
		t.Errorf("Verify after the second restore: %+v, %v; want 7 records", rep, err)
	}
	if st := l.Stats(); st.Restores != 2 || st.Recoveries != 0 {
		t.Errorf("Stats = %+v, want 2 restores and no recovery (the ledger never closed)", st)
	}
}

// TestSegmentReplacedNeedsOperator: another file is put at the segment's path (here an older
// copy, as a restore from backup or an editor's save would). The ledger does not overwrite
// it and does not append to it: it closes for appends with ErrRestartRequired, keeps its own
// records next to it, and stays closed.
func TestSegmentReplacedNeedsOperator(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := filepath.Join(f.dir, segment)
	l := f.open(t)
	appendN(t, l, 0, 3)
	older, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 3, 2)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, older, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	ledger.CheckSegment(l)
	_, err = l.Append(context.Background(), issued(5))
	if !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, ledger.ErrRestartRequired) {
		t.Fatalf("Append after the segment was replaced: err = %v, want ErrUnavailable and ErrRestartRequired", err)
	}
	kept, _ := filepath.Glob(path + ".open-*")
	if len(kept) != 1 || !strings.Contains(err.Error(), kept[0]) {
		t.Fatalf("kept copies %v; error %q should name the one copy", kept, err)
	}
	// The replacement is untouched and the kept copy holds the 5 acknowledged records.
	if got, _ := os.ReadFile(path); string(got) != string(older) {
		t.Error("the file put at the segment's path was changed")
	}
	keptDir := t.TempDir()
	if err := os.Rename(kept[0], filepath.Join(keptDir, segment)); err != nil {
		t.Fatal(err)
	}
	if rep, err := ledger.Verify(keptDir); err != nil || rep.Records != 5 {
		t.Errorf("Verify of the kept copy: %+v, %v; want the 5 acknowledged records", rep, err)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != 3 {
		t.Errorf("Verify of the replacement: %+v, %v; want its 3 records", rep, err)
	}
	ledger.Recover(l)
	if err := l.Err(); !errors.Is(err, ledger.ErrRestartRequired) {
		t.Errorf("Err after a recovery attempt = %v, want it still closed, ErrRestartRequired", err)
	}
}

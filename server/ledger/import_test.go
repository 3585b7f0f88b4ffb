package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/ledger/record"
)

// sourceLines returns every line (without newline) of the ledger in dir, through Leaves.
func sourceLines(t *testing.T, dir string) [][]byte {
	t.Helper()
	var out [][]byte
	if _, err := ledger.Leaves(dir, func(_ ledger.Record, line []byte) { out = append(out, bytes.Clone(line)) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// importLines writes lines into a new ledger in dir with Import.
func importLines(dir string, opts ledger.Options, lines [][]byte) (ledger.Report, error) {
	im, err := ledger.NewImport(dir, opts)
	if err != nil {
		return ledger.Report{}, err
	}
	for _, line := range lines {
		if err := im.Add(line); err != nil {
			return ledger.Report{}, err
		}
	}
	return im.Finish()
}

// TestImportWritesALedgerOfTheSameLines: lines taken from one ledger and imported into a new
// directory, in small segments, give the same lines byte for byte, across several closed
// (read-only) segments; Verify accepts it, and Open opens it from its index (reading only the
// tree's edge), with the source's root, and appends after it.
func TestImportWritesALedgerOfTheSameLines(t *testing.T) {
	f := newFixture(t)
	f.fill(t, 700)
	src := sourceLines(t, f.dir)
	l := f.open(t)
	root, _ := l.Tree().Root()
	l.Close()

	dir := filepath.Join(t.TempDir(), "imported")
	rep, err := importLines(dir, ledger.Options{SegmentSize: 64 << 10, Preallocate: 16 << 10}, src)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 700 || rep.LastSeq != 700 || rep.Segments < 3 {
		t.Fatalf("import report: %+v, want 700 records in several segments", rep)
	}
	got := sourceLines(t, dir)
	if len(got) != len(src) {
		t.Fatalf("imported %d lines, want %d", len(got), len(src))
	}
	for i := range src {
		if !bytes.Equal(got[i], src[i]) {
			t.Fatalf("line %d differs:\n%s\n%s", i+1, got[i], src[i])
		}
	}
	vrep, err := ledger.Verify(dir)
	if err != nil || vrep.Segments != rep.Segments {
		t.Fatalf("Verify: %+v, %v", vrep, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "ledger-000001.jsonl"))
	if err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("closed segment 1: %v, %v; want mode 0400", fi, err)
	}
	im, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if got, _ := im.Tree().Root(); got != root || im.Stats().ReadAtOpen > 1+255 {
		t.Errorf("imported ledger: root %s (want %s), read %d records at open (want only the edge: an index was built)", got, root, im.Stats().ReadAtOpen)
	}
	r, err := im.Append(context.Background(), refused(701))
	if err != nil || r.Seq != 701 {
		t.Fatalf("append after import: %+v, %v", r, err)
	}
}

// TestImportRefusesABrokenChain: a line removed, changed, or re-chained is refused naming the
// record, the directory is removed again, and a non-empty directory is refused.
func TestImportRefusesABrokenChain(t *testing.T) {
	f := newFixture(t)
	f.fill(t, 20)
	src := sourceLines(t, f.dir)
	// Record 8 rewritten and re-hashed: it is intact alone, but record 9 no longer links to it.
	r8, _, err := record.Decode(src[7])
	if err != nil {
		t.Fatal(err)
	}
	r8.Message = "rewritten"
	resealed, err := r8.Seal()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		lines [][]byte
		want  string
	}{
		{"missing", append(append([][]byte{}, src[:5]...), src[6:]...), "record 6: expected seq 6, found 7"},
		{"changed", replace(src, 3, bytes.Replace(src[3], []byte(`"issued"`), []byte(`"isSued"`), 1)), "record 4: hash mismatch"},
		{"rechained", replace(src, 7, bytes.TrimSuffix(resealed, []byte("\n"))), "record 9: chain broken"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "imported")
			_, err := importLines(dir, ledger.Options{}, c.lines)
			var ce *ledger.CorruptionError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("import: %v; want a corruption naming %q", err, c.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after a refused import the directory is still there: %v", err)
			}
		})
	}
	if _, err := ledger.NewImport(f.dir, ledger.Options{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("import into an existing ledger: %v", err)
	}
}

// TestLeavesStoppedNeedsTheLock: LeavesStopped refuses a ledger a Ledger has open
// (ErrLocked), and reads every line of a stopped one, stopping at fn's error.
func TestLeavesStoppedNeedsTheLock(t *testing.T) {
	f := newFixture(t)
	f.fill(t, 10)
	l := f.open(t)
	_, err := ledger.LeavesStopped(f.dir, func(ledger.Record, []byte) error { return nil })
	if !errors.Is(err, ledger.ErrLocked) {
		t.Fatalf("LeavesStopped with the ledger open: %v, want ErrLocked", err)
	}
	l.Close()
	var n int
	stop := errors.New("stop")
	rep, err := ledger.LeavesStopped(f.dir, func(r ledger.Record, _ []byte) error {
		n++
		if r.Seq == 4 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 4 {
		t.Fatalf("LeavesStopped: %d records, %v (report %+v); want it to stop at fn's error on record 4", n, err, rep)
	}
	n = 0
	if rep, err := ledger.LeavesStopped(f.dir, func(ledger.Record, []byte) error { n++; return nil }); err != nil || n != 10 || rep.Records != 10 {
		t.Fatalf("LeavesStopped: %d records, %+v, %v", n, rep, err)
	}
}

func replace(lines [][]byte, i int, line []byte) [][]byte {
	out := append([][]byte{}, lines...)
	out[i] = line
	return out
}

package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/ledger/index"
)

// snapshotLedger appends n issued records to a new ledger of 64 KiB segments and closes it;
// it returns the directory and the tree's root.
func snapshotLedger(t *testing.T, n int) (string, tlog.Hash) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ledger")
	l, err := ledger.Open(dir, ledger.Options{SegmentSize: 64 << 10, Preallocate: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if _, err := l.Append(context.Background(), issued(i)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := l.Tree().Root()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, root
}

// TestSnapshotReadsWhatItFinds: a snapshot of a stopped ledger finds a record by serial, UID
// and seq and proves it against the ledger's root with the oldest segments moved away (all but
// those of the tree's right edge), so it read neither them nor the history; a record in a
// moved segment is refused by name.
func TestSnapshotReadsWhatItFinds(t *testing.T) {
	dir, root := snapshotLedger(t, 700)
	segs := segmentsOf(t, dir)
	// The segments of records 1-512 go: the tree's right edge (records 513-700) is read at
	// open, from the segments, as a start does.
	archive, moved := t.TempDir(), 0
	for _, seg := range segs {
		if recs := recordsOf(t, seg); recs[len(recs)-1].Seq <= 512 {
			if err := os.Rename(seg, filepath.Join(archive, filepath.Base(seg))); err != nil {
				t.Fatal(err)
			}
			moved++
		}
	}
	if moved < 2 {
		t.Fatalf("moved %d segments, want at least 2", moved)
	}
	s, err := ledger.OpenSnapshot(dir)
	if err != nil {
		t.Fatalf("OpenSnapshot with the oldest segments moved away: %v", err)
	}
	defer s.Close()
	if got, err := s.Tree().Root(); err != nil || got != root || s.Tree().Size() != 700 {
		t.Fatalf("snapshot tree: size %d, root %v, %v; want 700 and the ledger's root", s.Tree().Size(), got, err)
	}
	for _, find := range []func() ([]ledger.Record, error){
		func() ([]ledger.Record, error) { return s.Find("", issued(699).Serial) },
		func() ([]ledger.Record, error) { return s.Find(issued(699).ObjectUID, "") },
		func() ([]ledger.Record, error) { r, _, err := s.Record(699); return []ledger.Record{r}, err },
	} {
		got, err := find()
		if err != nil || len(got) != 1 || got[0].Seq != 699 {
			t.Fatalf("finding record 699: %+v, %v", got, err)
		}
	}
	line, err := s.Line(699)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := s.Tree().ProveInclusion(698, 700)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckRecord(proof, 700, root, 698, ledgerproof.LeafHash(line)); err != nil {
		t.Fatalf("the snapshot's proof of record 699 does not lead to the ledger's root: %v", err)
	}
	if _, err := s.Find("", issued(3).Serial); !errors.Is(err, ledger.ErrSegmentsArchived) {
		t.Fatalf("a record in a moved segment: %v, want ErrSegmentsArchived", err)
	}
	if got, err := s.Find("", "ff00ff"); err != nil || len(got) != 0 {
		t.Fatalf("an unknown serial: %+v, %v", got, err)
	}
}

// TestSnapshotRefusesWhatItCannotSee: no snapshot while a server has the ledger open (its
// index is locked), nor of a ledger that holds records after its index's last (here, an
// index and tiles put back from before the last appends).
func TestSnapshotRefusesWhatItCannotSee(t *testing.T) {
	dir, _ := snapshotLedger(t, 300)
	saved := t.TempDir()
	copyFile(t, filepath.Join(dir, "index.db"), filepath.Join(saved, "index.db.file"))
	if err := os.CopyFS(filepath.Join(saved, "tiles.dir"), os.DirFS(filepath.Join(dir, "tiles"))); err != nil {
		t.Fatal(err)
	}

	l, err := ledger.Open(dir, ledger.Options{SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.OpenSnapshot(dir); !errors.Is(err, index.ErrLocked) {
		t.Fatalf("OpenSnapshot while the ledger is open: %v, want index.ErrLocked", err)
	}
	for i := 301; i <= 310; i++ {
		if _, err := l.Append(context.Background(), issued(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "tiles")); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(saved, "index.db.file"), filepath.Join(dir, "index.db"))
	if err := os.CopyFS(filepath.Join(dir, "tiles"), os.DirFS(filepath.Join(saved, "tiles.dir"))); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.OpenSnapshot(dir); !errors.Is(err, ledger.ErrSnapshotBehind) {
		t.Fatalf("OpenSnapshot of an index behind the segments: %v, want ErrSnapshotBehind", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
